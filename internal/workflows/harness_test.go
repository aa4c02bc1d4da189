package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/shim"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/workflows"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// childEnv carries a child sidecar's options (JSON of childConfig): the tests run the
// sidecar as a real process (this test binary re-executed) so that it can be kill -9ed.
const childEnv = "WORKFLOWS_TEST_SIDECAR"

type childConfig struct {
	Addr      string               `json:"addr"`
	DataDir   string               `json:"dataDir"`
	RunnerURL string               `json:"runnerURL"`
	Workflows []api.WorkflowConfig `json:"workflows"`
	TimeScale float64              `json:"timeScale"`
}

func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(runChild(raw))
	}
	os.Exit(m.Run())
}

func runChild(raw string) int {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	profileChild()
	srv, err := sidecar.New(sidecar.Options{Addr: c.Addr, DataDir: c.DataDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := workflows.Attach(srv, workflows.Options{RunnerURL: c.RunnerURL, Workflows: c.Workflows, TimeScale: c.TimeScale,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var lerr error
	for range 200 { // a killed predecessor's port may take a moment to free
		if lerr = srv.Listen(); lerr == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if lerr != nil {
		fmt.Fprintln(os.Stderr, lerr)
		return 2
	}
	return serveChild(srv)
}

// serveChild serves until SIGTERM, then shuts the sidecar down gracefully (as the
// sidecar command does, with its default 10 s grace).
func serveChild(srv *sidecar.Server) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case err := <-errc:
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
		return 1
	}
	<-errc
	return 0
}

// wfDef is one workflow of the test worker: engine config + class + user binding name.
type wfDef struct {
	cfg     api.WorkflowConfig
	class   string
	binding string
}

type harness struct {
	t                                 testing.TB
	cfg                               childConfig
	dir                               string
	sidecarAddr, httpAddr, runnerAddr string
	counter                           *counterServer
	client                            *http.Client
	logs                              *syncBuffer

	mu      sync.Mutex
	sidecar *proc
	workerd *proc
}

type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func (p *proc) kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill() // SIGKILL
	<-p.exited
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 4<<20 {
		s.b.Reset()
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHarness(t testing.TB, scale float64, defs ...wfDef) *harness {
	t.Helper()
	h := &harness{
		t: t, dir: t.TempDir(), logs: &syncBuffer{},
		sidecarAddr: testenv.FreeLoopbackAddr(t), httpAddr: testenv.FreeLoopbackAddr(t), runnerAddr: testenv.FreeLoopbackAddr(t),
		client: newHarnessClient(),
	}
	h.counter = newCounterServer(t)
	h.cfg = childConfig{Addr: h.sidecarAddr, DataDir: filepath.Join(h.dir, "state"), RunnerURL: "http://" + h.runnerAddr, TimeScale: scale}
	for _, d := range defs {
		h.cfg.Workflows = append(h.cfg.Workflows, d.cfg)
	}
	h.writeConfig(defs)
	h.startSidecar()
	h.startWorkerd()
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.workerd.kill()
		h.sidecar.kill()
		if t.Failed() {
			out := h.logs.String()
			if len(out) > 20000 {
				out = out[len(out)-20000:]
			}
			t.Logf("process output (tail):\n%s", out)
		}
	})
	return h
}

func (h *harness) writeConfig(defs []wfDef) {
	var userB, runnerB []string
	userB = append(userB, `(name = "COUNTER", service = "counter")`)
	for _, d := range defs {
		userB = append(userB, fmt.Sprintf(`(name = %q, wrapped = (moduleName = "workerd-operator:workflows-binding", innerBindings = [(name = "sidecar", service = "sidecar"), (name = "config", json = %q)]))`,
			d.binding, fmt.Sprintf(`{"workflow":%q}`, d.cfg.Name)))
		runnerB = append(runnerB, fmt.Sprintf(`(name = %q, service = (name = "user", entrypoint = %q))`, d.cfg.Name, d.class))
	}
	capnp := fmt.Sprintf(`using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "user", worker = (modules = [(name = "worker.js", esModule = embed "worker.js")], compatibilityDate = "2026-09-10",
      bindings = [%s])),
    (name = "workflows-runner", worker = (modules = [
        (name = "workflows-runner.js", esModule = embed "workflows-runner.js"),
        (name = "workflows-step.js", esModule = embed "workflows-step.js")],
      compatibilityDate = "2026-09-10", bindings = [%s])),
    (name = "sidecar", external = (address = "127.0.0.1:9", http = ())),
    (name = "counter", external = (address = "127.0.0.1:9", http = ())),
  ],
  sockets = [
    (name = "http", address = "127.0.0.1:9", http = (), service = "user"),
    (name = "workflows", address = "127.0.0.1:9", http = (), service = "workflows-runner"),
  ],
  extensions = [(modules = [(name = "workerd-operator:workflows-binding", esModule = embed "workflows-binding.js", internal = true)])],
);
`, strings.Join(userB, ",\n      "), strings.Join(runnerB, ",\n      "))
	files := map[string][]byte{"config.capnp": []byte(capnp)}
	b, err := os.ReadFile("testdata/worker.js")
	if err != nil {
		h.t.Fatal(err)
	}
	files["worker.js"] = b
	for _, n := range []string{"workflows-runner.js", "workflows-step.js", "workflows-binding.js"} {
		files[n] = shim.MustSource(n)
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(h.dir, n), b, 0o644); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) start(name string, cmd *exec.Cmd) *proc {
	cmd.Stdout, cmd.Stderr = h.logs, h.logs
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p
}

func (h *harness) startSidecar() {
	raw, _ := json.Marshal(h.cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	p := h.start("sidecar", cmd)
	h.waitUp("sidecar", p, "http://"+h.sidecarAddr+"/healthz")
	h.mu.Lock()
	h.sidecar = p
	h.mu.Unlock()
}

func (h *harness) startWorkerd() {
	cmd := exec.Command(testenv.WorkerdBinary(h.t), "serve", "config.capnp",
		"--socket-addr=http="+h.httpAddr, "--socket-addr=workflows="+h.runnerAddr,
		"--external-addr=sidecar="+h.sidecarAddr, "--external-addr=counter="+h.counter.addr)
	cmd.Dir = h.dir
	p := h.start("workerd", cmd)
	h.waitUp("workerd", p, "http://"+h.runnerAddr+"/healthz")
	h.mu.Lock()
	h.workerd = p
	h.mu.Unlock()
}

func (h *harness) waitUp(name string, p *proc, url string) {
	for i := 0; ; i++ {
		select {
		case <-p.exited:
			h.t.Fatalf("%s exited:\n%s", name, h.logs.String())
		default:
		}
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode < 500 { // any answer: the server is up
				return
			}
		}
		if i > 600 {
			h.t.Fatalf("%s did not answer %s: %v\n%s", name, url, err, h.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newHarnessClient() *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
}

// api calls the sidecar's HTTP API; it returns the status and decodes the JSON into out.
func (h *harness) api(method, path string, body, out any) int {
	h.t.Helper()
	return h.call("http://"+h.sidecarAddr+path, method, body, out)
}

// binding calls env.<BINDING>.<op> through the test worker.
func (h *harness) binding(bind, op string, body, out any) int {
	h.t.Helper()
	return h.call("http://"+h.httpAddr+"/"+bind+"/"+op, "POST", body, out)
}

func (h *harness) call(url, method string, body, out any) int {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: %d %s: %v", method, url, res.StatusCode, b, err)
		}
	}
	return res.StatusCode
}

func (h *harness) create(wf, id string, params any) {
	h.t.Helper()
	var out map[string]any
	if st := h.api("POST", "/workflows/"+wf+"/instances", map[string]any{"id": id, "params": params}, &out); st != 201 {
		h.t.Fatalf("create %s/%s: %d %v", wf, id, st, out)
	}
}

func (h *harness) get(wf, id string) api.Instance {
	h.t.Helper()
	var in api.Instance
	if st := h.api("GET", "/workflows/"+wf+"/instances/"+id, nil, &in); st != 200 {
		h.t.Fatalf("get %s/%s: %d", wf, id, st)
	}
	return in
}

func (h *harness) steps(wf, id string) []api.Step {
	h.t.Helper()
	var out struct{ Steps []api.Step }
	h.api("GET", "/workflows/"+wf+"/instances/"+id+"/steps", nil, &out)
	return out.Steps
}

func (h *harness) step(wf, id, kind, name string, n int) *api.Step {
	for _, s := range h.steps(wf, id) {
		if s.Kind == kind && s.Name == name && s.N == n {
			return &s
		}
	}
	return nil
}

// waitFor polls cond until it holds (the deadline is a failure guard, not an assertion).
func (h *harness) waitFor(what string, limit time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("gave up waiting for %s after %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) waitStatus(wf, id string, want ...string) api.Instance {
	h.t.Helper()
	var in api.Instance
	h.waitFor(fmt.Sprintf("%s/%s to be %v", wf, id, want), 120*time.Second, func() bool {
		in = h.get(wf, id)
		for _, w := range want {
			if in.Status == w {
				return true
			}
		}
		return false
	})
	return in
}

// counterServer is the external store of side effects: POST /inc?key=K increments K and
// answers {"count": n}; every increment's arrival time is kept.
type counterServer struct {
	addr string
	mu   sync.Mutex
	hits map[string][]int64 // key -> arrival times (ms since the epoch)
}

func newCounterServer(t testing.TB) *counterServer {
	c := &counterServer{addr: testenv.FreeLoopbackAddr(t), hits: map[string][]int64{}}
	srv := &http.Server{Addr: c.addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.URL.Query().Get("key")
		c.mu.Lock()
		c.hits[k] = append(c.hits[k], time.Now().UnixMilli())
		n := len(c.hits[k])
		c.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]int{"count": n})
	})}
	ln, err := netListen(c.addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return c
}

func (c *counterServer) times(k string) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.hits[k]...)
}
