package channels_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/shim"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// specLimits are the channel limits and the backlog reason as DESIGN.md §6 states them
// (read at test time, never copied by hand).
type specLimits struct {
	channels, subscribers, messageBytes, backlogBytes int
	backlogReason                                     string
}

func readSpec(t testing.TB) specLimits {
	t.Helper()
	b, err := os.ReadFile(testenv.SharedFile(t, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	m := regexp.MustCompile(`(\d+) channels per object instance, (\d+) subscribers per channel, (\d+) KiB per message, (\d+) MiB backlog per subscriber — over it the subscriber is disconnected with the reason "([^"]+)"`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("DESIGN.md §6: channel limits sentence not found")
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return specLimits{n(m[1]), n(m[2]), n(m[3]) << 10, n(m[4]) << 20, m[5]}
}

// harness: a real sidecar server (in-process) and the pinned workerd running
// testdata/worker.js with the channels client (internal/shim/channels.js) as a wrapped
// binding whose `sidecar` is the external service pointing at the sidecar.
type harness struct {
	t           testing.TB
	sidecarAddr string
	dataDir     string
	lease       time.Duration
	srv         *sidecar.Server
	serveDone   chan error
	base        string
	client      *http.Client
}

func newHarness(t testing.TB, lease time.Duration) *harness {
	t.Helper()
	h := &harness{
		t: t, sidecarAddr: testenv.FreeLoopbackAddr(t), dataDir: t.TempDir(), lease: lease,
		client: &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}},
	}
	h.startSidecar()
	t.Cleanup(func() { h.stopSidecar(false) })

	dir := t.TempDir()
	for name, src := range map[string]string{"config.capnp": "testdata/config.capnp.tmpl", "worker.js": "testdata/worker.js"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "channels.js"), shim.MustSource("channels.js"), 0o644); err != nil {
		t.Fatal(err)
	}
	httpAddr := testenv.FreeLoopbackAddr(t)
	var logs bytes.Buffer
	cmd := exec.Command(testenv.WorkerdBinary(t), "serve", "config.capnp",
		"--socket-addr=http="+httpAddr, "--external-addr=sidecar="+h.sidecarAddr)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &syncWriter{w: &logs}, &syncWriter{w: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("workerd output:\n%s", logs.String())
		}
	})
	h.base = "http://" + httpAddr
	for i := 0; ; i++ {
		select {
		case <-exited:
			t.Fatalf("workerd exited:\n%s", logs.String())
		default:
		}
		res, err := http.Get(h.base + "/outside")
		if err == nil {
			res.Body.Close()
			break
		}
		if i > 300 {
			t.Fatalf("workerd did not answer on %s: %v\n%s", httpAddr, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return h
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (h *harness) startSidecar() {
	h.t.Helper()
	srv, err := sidecar.New(sidecar.Options{Addr: h.sidecarAddr, DataDir: h.dataDir, ChannelLease: h.lease})
	if err != nil {
		h.t.Fatal(err)
	}
	var lerr error
	for i := 0; i < 100; i++ { // the old listener's port may take a moment to free
		if lerr = srv.Listen(); lerr == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lerr != nil {
		h.t.Fatal(lerr)
	}
	h.srv = srv
	h.serveDone = make(chan error, 1)
	go func() { h.serveDone <- srv.Serve() }()
}

// stopSidecar stops the sidecar: graceful (Shutdown) or abrupt (Close, connections cut).
func (h *harness) stopSidecar(graceful bool) {
	if h.srv == nil {
		return
	}
	if graceful {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.srv.Shutdown(ctx)
	} else {
		_ = h.srv.Close()
	}
	<-h.serveDone
	h.srv = nil
}

// result is a DO op's JSON answer.
type result map[string]any

func (r result) errCode() string {
	if e, ok := r["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

func (r result) str(k string) string { s, _ := r[k].(string); return s }
func (r result) num(k string) int    { f, _ := r[k].(float64); return int(f) }
func (r result) strs(k string) []string {
	var out []string
	for _, v := range r[k].([]any) {
		out = append(out, v.(string))
	}
	return out
}

// do runs op in Durable Object `object` (Obj class) through workerd.
func (h *harness) do(object, op string, body any) result {
	h.t.Helper()
	b, _ := json.Marshal(body)
	res, err := h.client.Post(h.base+"/o/"+object+"/"+op, "application/json", bytes.NewReader(b))
	if err != nil {
		h.t.Fatalf("%s %s: %v", object, op, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var r result
	if err := json.Unmarshal(raw, &r); err != nil {
		h.t.Fatalf("%s %s: HTTP %d, not JSON: %s", object, op, res.StatusCode, raw)
	}
	return r
}

// ok is do that fails the test on an error answer.
func (h *harness) ok(object, op string, body any) result {
	h.t.Helper()
	r := h.do(object, op, body)
	if c := r.errCode(); c != "" || r["error"] != nil {
		h.t.Fatalf("%s %s %v: unexpected error %v", object, op, body, r["error"])
	}
	return r
}

func (h *harness) subscribe(object, channel string) string {
	h.t.Helper()
	return h.ok(object, "subscribe", map[string]any{"channel": channel}).str("handle")
}

// sse reads server-sent events from an open response.
type sse struct {
	res *http.Response
	r   *bufio.Reader
}

type event struct {
	name, data string
	comment    string
}

func (s *sse) next() (event, error) {
	var ev event
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || data != nil || ev.comment != "" {
				ev.data = strings.Join(data, "\n")
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			ev.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[len("data: "):])
		}
	}
}

func (h *harness) openSSE(path string) *sse {
	h.t.Helper()
	res, err := (&http.Client{}).Get(h.base + path)
	if err != nil {
		h.t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		h.t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	h.t.Cleanup(func() { res.Body.Close() })
	return &sse{res: res, r: bufio.NewReader(res.Body)}
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// parallel runs fs concurrently and waits for all.
func parallel(fs ...func()) {
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}
