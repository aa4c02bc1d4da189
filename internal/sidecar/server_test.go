package sidecar_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// The server's routes: health, metrics (with the channel series moving), channel API, a
// mounted sub-API (the /workflows/ hook), and the data directory's boot record.
func TestServer(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "state")
	srv, err := sidecar.New(sidecar.Options{Addr: testenv.FreeLoopbackAddr(t), DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("/workflows", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "workflows saw "+r.URL.Path)
	}))
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	base := "http://" + srv.Addr()

	obj := base + "/channels/v1/objects/ns/obj/"
	_, sub := post(t, obj+"subscribe", `{"channel":"room"}`)
	if !strings.Contains(sub, `"handle"`) {
		t.Fatalf("subscribe: %s", sub)
	}
	if code, body := post(t, obj+"publish", `{"channel":"room","message":"hi"}`); code != 200 || !strings.Contains(body, `"reached":1`) {
		t.Fatalf("publish: %d %s", code, body)
	}

	cases := []struct {
		name, path string
		status     int
		contains   []string
	}{
		{"healthz", "/healthz", 200, []string{"ok"}},
		{"metrics", "/metrics", 200, []string{
			"workerd_operator_channels_open 1", "workerd_operator_channels_subscribers 1",
			"workerd_operator_channels_backlog_bytes 2", "workerd_operator_channels_messages_published_total 1",
			"go_goroutines",
		}},
		{"channel info", "/channels/v1/info", 200, []string{`"contract":"0.1.0"`, `"maxChannels":64`, `"leaseMs":30000`}},
		{"mounted sub-API", "/workflows/v1/instances", 200, []string{"workflows saw /workflows/v1/instances"}},
		{"unknown channel route", "/channels/v1/nope", 404, []string{`"code":"INVALID_ARGUMENT"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, base+tc.path)
			if code != tc.status {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, code, body, tc.status)
			}
			for _, s := range tc.contains {
				if !strings.Contains(body, s) {
					t.Fatalf("GET %s: body lacks %q:\n%s", tc.path, s, body)
				}
			}
		})
	}
	boots, err := os.ReadFile(filepath.Join(dataDir, "channels", "boots"))
	if err != nil || strings.TrimSpace(string(boots)) != srv.Channels().BootID() {
		t.Fatalf("boots file %q (%v), want this run's boot id %s", boots, err, srv.Channels().BootID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Bad options name the flag.
func TestNewErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sidecar.New(sidecar.Options{Addr: "127.0.0.1:0", DataDir: filepath.Join(file, "sub")}); err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("data dir under a file: %v, want an error naming --data-dir", err)
	}
	srv, err := sidecar.New(sidecar.Options{Addr: "256.0.0.1:1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("bad address: %v, want an error naming --listen", err)
	}
}

// TestOneMarkerPerRequest: a request carrying two gateways' marker headers (a Cache API
// request whose headers the Worker set to a dispatch call's) reaches neither gateway.
func TestOneMarkerPerRequest(t *testing.T) {
	srv, err := sidecar.New(sidecar.Options{Addr: testenv.FreeLoopbackAddr(t), DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range podcontract.MarkerHeaders {
		srv.HandleMarked(h, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "reached "+h) }))
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close() })
	for _, tc := range []struct {
		headers    []string
		wantStatus int
		wantBody   string
	}{
		{[]string{podcontract.CacheHeader}, 200, "reached " + podcontract.CacheHeader},
		{[]string{podcontract.DispatchNamespaceHeader}, 200, "reached " + podcontract.DispatchNamespaceHeader},
		{[]string{podcontract.CacheHeader, podcontract.DispatchNamespaceHeader}, 400, "sidecar: a request may carry one of"},
		{[]string{podcontract.AIBindingHeader, podcontract.R2BucketHeader}, 400, "sidecar: a request may carry one of"},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/x", nil)
		for _, h := range tc.headers {
			req.Header.Set(h, "v")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.wantStatus || !strings.HasPrefix(string(b), tc.wantBody) {
			t.Errorf("%v: %d %q, want %d %q", tc.headers, res.StatusCode, b, tc.wantStatus, tc.wantBody)
		}
	}
}
