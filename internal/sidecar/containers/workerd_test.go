package containers

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// templateDir is Cloudflare's containers-template server (container_src), vendored
// with the other templates.
const templateDir = "../../../test/testdata/cloudflare-templates/containers-template/container_src"

// templatePort is the port the template's server binds (":8080", every interface).
const templatePort = "8080"

// buildTemplateServer builds the template's server.
func buildTemplateServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	if err := testenv.BuildServer(templateDir, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// requestLog records the Docker API calls workerd made and the answers.
type requestLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(sw, r)
		l.mu.Lock()
		l.lines = append(l.lines, fmt.Sprintf("%s %s %d", r.Method, r.URL.RequestURI(), sw.status))
		l.mu.Unlock()
	})
}

func (l *requestLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// expect fails t unless every call in want was made.
func (l *requestLog) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(l.String(), w) {
			t.Errorf("%s did not make the call %q; Docker API calls:\n%s", what, w, l.String())
		}
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

const contractConfig = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = (
      modules = [(name = "worker.js", esModule = embed "worker.js")],
      compatibilityDate = "2025-10-08",
      durableObjectNamespaces = [(className = "Box", uniqueKey = "box-key", container = (imageName = "example.invalid/containers-template:1"))],
      durableObjectStorage = (inMemory = void),
      containerEngine = (localDocker = (socketPath = "unix:%s", containerEgressInterceptorImage = "workerd-operator.invalid/virtual-egress", sessionId = "sess1")),
      bindings = [(name = "BOX", durableObjectNamespace = "Box")],
    )),
  ],
  sockets = [(name = "http", address = "%s", http = (), service = "main")],
);
`

// TestWorkerdContract runs the pinned workerd against the Server with the template's
// real server as the container: start → fetch → not listening → signal(15) → restart
// (create 409 → DELETE → create) → destroy → workerd's own shutdown.
func TestWorkerdContract(t *testing.T) {
	bin := buildTemplateServer(t)
	if l, err := net.Listen("tcp", ":"+templatePort); err != nil {
		t.Skipf("port %s, which the template's server binds, is busy: %v", templatePort, err)
	} else {
		l.Close()
	}
	dir, err := os.MkdirTemp("", "wdc") // short: a unix socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	b := &processBackend{bin: bin, readyPort: templatePort, procs: map[string]*process{}}
	log := serveLogged(t, b, sock)
	wd := startContractWorkerd(t, testenv.WorkerdBinary(t), dir, sock)
	call := func(path string) map[string]any {
		t.Helper()
		out := wd.get(t, path)
		if out["error"] != nil {
			t.Fatalf("GET %s: %v\nDocker API calls:\n%s\nworkerd:\n%s", path, out["error"], log.String(), wd.out.String())
		}
		return out
	}

	out := call("/start?message=hello-from-the-test&net=1")
	id, _ := out["id"].(string)
	want := `Hi, I'm a container and this is my message: "hello-from-the-test", my instance ID is: ` + id
	if len(id) != 64 || out["fetch"] != want || out["running"] != true {
		t.Fatalf("first start: %v\nwant fetch %q\nDocker API calls:\n%s", out, want, log.String())
	}
	b.mu.Lock()
	inst := b.started[0]
	b.mu.Unlock()
	if strings.Join(inst.Args, " ") != "/server --from-entrypoint" || !inst.Internet || !strings.HasSuffix(inst.Name, "-"+id) {
		t.Errorf("instance: %+v", inst)
	}

	if out := call("/closed"); !strings.Contains(fmt.Sprint(out["err"]), "not listening to port 9999") {
		t.Errorf("getTcpPort(9999).fetch: %v", out)
	}
	if out := call("/signal"); out["monitor"] != "exit 0" || out["running"] != false {
		t.Fatalf("signal(15): %v, want monitor() resolved (exit 0 after graceful shutdown)", out)
	}
	if out := call("/start?message=again"); !strings.Contains(fmt.Sprint(out["fetch"]), `message: "again"`) {
		t.Fatalf("restart: %v\nDocker API calls:\n%s", out, log.String())
	}
	app := inst.Name
	log.expect(t, "the restart", "POST /containers/create?name="+app+" 409", "DELETE /containers/"+app+"?force=true 204",
		"POST /containers/"+app+"/wait?condition=removed 404", "POST /containers/create?name="+app+" 201")
	if out := call("/destroy"); out["destroyed"] != true || out["running"] != false || b.running() != 0 {
		t.Fatalf("destroy: %v, %d instances still running", out, b.running())
	}
	if r := raw(t, "unix", sock, "GET", "/containers/"+app+"/json", map[string]string{"host": "localhost"}, ""); r.status != 404 {
		t.Errorf("after destroy, inspect: %d %s", r.status, r.body)
	}
	wd.stop(t)
	log.expect(t, "workerd's shutdown", "DELETE /containers/"+app+"-proxy?force=true 204")
	t.Logf("Docker API calls:\n%s", log.String())
}

// serveLogged serves a Server running b on sock and logs its calls.
func serveLogged(t *testing.T, b *processBackend, sock string) *requestLog {
	t.Helper()
	t.Cleanup(b.killAll)
	s := New(b, Options{Image: "example.invalid/containers-template:1"})
	t.Cleanup(func() { s.Close() })
	log := &requestLog{}
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: log.wrap(s)}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { hs.Close() })
	return log
}

type contractWorkerd struct {
	cmd  *exec.Cmd
	addr string
	out  syncBuffer
	done chan struct{}
}

func startContractWorkerd(t *testing.T, bin, dir, sock string) *contractWorkerd {
	t.Helper()
	js, err := os.ReadFile("testdata/worker/worker.js")
	if err != nil {
		t.Fatal(err)
	}
	wd := &contractWorkerd{addr: testenv.FreeLoopbackAddr(t), done: make(chan struct{})}
	for name, b := range map[string][]byte{"worker.js": js, "config.capnp": []byte(fmt.Sprintf(contractConfig, sock, wd.addr))} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wd.cmd = exec.Command(bin, "serve", "config.capnp", "--experimental")
	wd.cmd.Dir = dir
	wd.cmd.Stdout, wd.cmd.Stderr = &wd.out, &wd.out
	if err := wd.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = wd.cmd.Wait(); close(wd.done) }()
	t.Cleanup(func() { _ = wd.cmd.Process.Kill(); <-wd.done })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", wd.addr); err == nil {
			c.Close()
			return wd
		}
		select {
		case <-wd.done:
			t.Fatalf("workerd exited: %s", wd.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("workerd did not listen on %s: %s", wd.addr, wd.out.String())
		}
	}
}

func (wd *contractWorkerd) get(t *testing.T, path string) map[string]any {
	t.Helper()
	c := &http.Client{Timeout: 45 * time.Second}
	resp, err := c.Get("http://" + wd.addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v\nworkerd:\n%s", path, err, wd.out.String())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET %s: %d %q\nworkerd:\n%s", path, resp.StatusCode, body, wd.out.String())
	}
	return out
}

// stop sends SIGTERM, as the kubelet does, and waits for workerd's cleanup.
func (wd *contractWorkerd) stop(t *testing.T) {
	t.Helper()
	_ = wd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-wd.done:
	case <-time.After(20 * time.Second):
		t.Errorf("workerd did not exit within 20 s of SIGTERM: %s", wd.out.String())
	}
}
