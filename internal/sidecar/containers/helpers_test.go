package containers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBackend runs nothing: Start answers host at once and exit(name, code) ends a run.
type fakeBackend struct {
	host     string
	startErr error

	mu      sync.Mutex
	started []Instance
	stops   []stopCall
	removed []string
	exits   map[string]chan int
}

type stopCall struct {
	name  string
	grace time.Duration
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{host: "127.0.0.1", exits: map[string]chan int{}}
}

func (f *fakeBackend) Start(ctx context.Context, inst Instance) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, inst)
	if f.startErr != nil {
		return "", f.startErr
	}
	f.exits[inst.Name] = make(chan int, 1)
	return f.host, nil
}

func (f *fakeBackend) Wait(ctx context.Context, name string) (int, error) {
	f.mu.Lock()
	ch := f.exits[name]
	f.mu.Unlock()
	if ch == nil {
		return 0, fmt.Errorf("no instance %s", name)
	}
	select {
	case code := <-ch:
		return code, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (f *fakeBackend) Stop(ctx context.Context, name string, grace time.Duration) error {
	f.mu.Lock()
	f.stops = append(f.stops, stopCall{name, grace})
	f.mu.Unlock()
	code := 137
	if grace > 0 {
		code = 143
	}
	f.exit(name, code)
	return nil
}

func (f *fakeBackend) Remove(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, name)
	delete(f.exits, name)
	return nil
}

func (f *fakeBackend) exit(name string, code int) {
	f.mu.Lock()
	ch := f.exits[name]
	f.mu.Unlock()
	if ch != nil {
		select {
		case ch <- code:
		default:
		}
	}
}

func (f *fakeBackend) snapshot() (started []Instance, stops []stopCall, removed []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Instance(nil), f.started...), append([]stopCall(nil), f.stops...), append([]string(nil), f.removed...)
}

// harness is a Server on a unix socket, spoken to as workerd does: one connection per
// request, bodyless POST/DELETE with an empty chunked body, no API version.
type harness struct {
	t    *testing.T
	s    *Server
	b    *fakeBackend
	sock string
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	dir, err := os.MkdirTemp("", "dockerapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &harness{t: t, b: newFakeBackend(), sock: filepath.Join(dir, "docker.sock")}
	h.s = New(h.b, opts)
	l, err := ListenUnix(h.sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.s.Serve(l) }()
	t.Cleanup(func() { h.s.Close() })
	return h
}

// reply is a decoded answer.
type reply struct {
	status int
	body   []byte
}

func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
}

func (r reply) message(t *testing.T) string {
	var e errorResponse
	r.json(t, &e)
	return e.Message
}

// raw sends one HTTP/1.1 request with exactly the given headers and body over a new
// connection to network/addr and reads the answer.
func raw(t *testing.T, network, addr, method, target string, hdrs map[string]string, body string) reply {
	t.Helper()
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	for k, v := range hdrs {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if strings.EqualFold(hdrs["transfer-encoding"], "chunked") {
		if body != "" {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(body), body)
		}
		b.WriteString("0\r\n\r\n")
	} else {
		b.WriteString(body)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, out}
}

// docker sends a request the way workerd does (see testdata/workerd-requests.log).
func (h *harness) docker(method, target, body string) reply {
	h.t.Helper()
	hdrs := map[string]string{"host": "localhost"}
	switch {
	case body != "":
		hdrs["content-type"] = "application/json"
		hdrs["content-length"] = fmt.Sprint(len(body))
	case strings.HasSuffix(strings.SplitN(target, "?", 2)[0], "/start"):
		hdrs["content-type"] = "application/json"
		hdrs["content-length"] = "0"
	case method != http.MethodGet:
		hdrs["transfer-encoding"] = "chunked"
	}
	return raw(h.t, "unix", h.sock, method, target, hdrs, body)
}

// proxyPort is the published 39001/tcp of a running -proxy.
func (h *harness) proxyPort(name string) string {
	h.t.Helper()
	r := h.docker("GET", "/containers/"+name+"/json", "")
	var in inspectResponse
	r.json(h.t, &in)
	ports := in.NetworkSettings.Ports["39001/tcp"]
	if r.status != 200 || len(ports) != 1 || ports[0].HostPort == "" {
		h.t.Fatalf("inspect %s: %d %s", name, r.status, r.body)
	}
	return ports[0].HostPort
}

const (
	testDOID  = "776132e48dc6c8101ad28a5518e85c31c17401fd94527c1ef9812839e0ce4c12"
	testApp   = "workerd-sess1-box-key-" + testDOID
	testProxy = testApp + "-proxy"
	proxyBody = `{"ExposedPorts":{"39001/tcp":{}},"Cmd":["--http-egress-port","36819"],"Image":"virtual/proxy:none",` +
		`"HostConfig":{"PublishAllPorts":true,"CapAdd":["NET_ADMIN"],"NetworkMode":"bridge"}}`
	appBody = `{"Env":["MESSAGE=hi","CLOUDFLARE_DURABLE_OBJECT_ID=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"],` +
		`"Cmd":["/server","--x"],"Image":"example/app:1","StopTimeout":10,` +
		`"HostConfig":{"PidMode":"host","RestartPolicy":{"Name":"on-failure"},"NetworkMode":"container:` + testProxy + `"}}`
)

// runningApp creates and starts the proxy and the app, as workerd's start() does.
func (h *harness) runningApp() {
	h.t.Helper()
	for _, step := range []struct {
		method, target, body string
		want                 int
	}{
		{"POST", "/containers/create?name=" + testProxy, proxyBody, 201},
		{"POST", "/containers/" + testProxy + "/start", "", 204},
		{"POST", "/containers/create?name=" + testApp, appBody, 201},
		{"POST", "/containers/" + testApp + "/start", "", 204},
	} {
		if r := h.docker(step.method, step.target, step.body); r.status != step.want {
			h.t.Fatalf("%s %s: %d %s, want %d", step.method, step.target, r.status, r.body, step.want)
		}
	}
}
