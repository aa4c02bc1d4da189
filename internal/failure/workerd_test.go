package failure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// compatibilityDate for the test Workers; any date the pinned workerd supports.
const compatibilityDate = "2025-01-01"

// guard bounds how long a test waits for workerd; it is a hang guard, not an assertion.
const guard = 2 * time.Minute

// lockedBuffer is a bytes.Buffer safe for the process's writer and the test's reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// workerdRun is one workerd process started on a config in a temporary directory.
type workerdRun struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	err            error
}

// startWorkerd writes files (name → content) and config.capnp into a temporary
// directory and starts `workerd serve config.capnp` with the given extra args.
func startWorkerd(t *testing.T, config string, files map[string][]byte, args ...string) *workerdRun {
	t.Helper()
	all := map[string][]byte{"config.capnp": []byte(config)}
	for name, b := range files {
		all[name] = b
	}
	return startWorkerdFiles(t, all, args...)
}

// startWorkerdFiles writes files (relative path → content, config.capnp among them)
// into a temporary directory and starts `workerd serve config.capnp <args>` there.
func startWorkerdFiles(t *testing.T, files map[string][]byte, args ...string) *workerdRun {
	t.Helper()
	bin := testenv.WorkerdBinary(t)
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &workerdRun{done: make(chan struct{})}
	r.cmd = exec.Command(bin, append([]string{"serve", "config.capnp"}, args...)...)
	r.cmd.Dir = dir
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// wait waits for the process to exit (hang guard: guard).
func (r *workerdRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(guard):
		t.Fatalf("workerd did not exit within %v; stderr:\n%s", guard, r.stderr.String())
	}
}

// termination is what the kubelet would record for the exited process: exit code or
// signal, and (terminationMessagePolicy FallbackToLogsOnError) the log tail as the
// message — at most 80 lines and 2048 bytes, like the kubelet. stderr goes after
// stdout (a pod log interleaves them; workerd writes its errors to stderr).
func (r *workerdRun) termination(t *testing.T) Termination {
	t.Helper()
	var tm Termination
	var ee *exec.ExitError
	switch {
	case r.err == nil:
	case errors.As(r.err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			tm.Signal = int32(ws.Signal())
			tm.ExitCode = 128 + tm.Signal
		} else {
			tm.ExitCode = int32(ws.ExitStatus())
		}
		tm.Reason = "Error"
	default:
		t.Fatalf("workerd: %v", r.err)
	}
	tm.Message = logTail(r.stdout.String() + r.stderr.String())
	return tm
}

// logTail mimics kubelet's FallbackToLogsOnError: the last 80 lines, at most 2048 bytes.
func logTail(s string) string {
	const maxLines, maxBytes = 80, 2048
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	s = strings.Join(lines, "")
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	return s
}

// waitHTTP polls url until it answers or the process exits (hang guard: guard).
func (r *workerdRun) waitHTTP(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-r.done:
			t.Fatalf("workerd exited before listening on %s: %v\nstderr:\n%s", addr, r.err, r.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("workerd did not listen on %s within %v", addr, guard)
		}
	}
}

// getBody GETs url and returns the body of a 200 answer.
func getBody(t *testing.T, ctx context.Context, url string) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", url, resp.StatusCode, body)
	}
	return body
}

func oneWorkerConfig(service, module, addr, extraWorker, extraConfig string) string {
	return fmt.Sprintf(`using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = %q, worker = (modules = [(name = %q, esModule = embed %q)]%s))],
  sockets = [(name = "http", address = %q, service = %q)],%s
);
`, service, module, module, extraWorker, addr, service, extraConfig)
}

// TestVectorsJSInWorkerd runs every vector through internal/shim/failure.js inside the
// pinned workerd and asserts the JavaScript results equal the Go results and the
// vectors' expectations.
func TestVectorsJSInWorkerd(t *testing.T) {
	vectors := loadVectors(t)
	js, err := os.ReadFile(filepath.Join("..", "shim", "failure.js"))
	if err != nil {
		t.Fatal(err)
	}
	harness, err := os.ReadFile(filepath.Join("testdata", "harness.js"))
	if err != nil {
		t.Fatal(err)
	}
	vj, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeLoopbackAddr(t)
	config := fmt.Sprintf(`using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "vectors", worker = (
    modules = [
      (name = "harness.js", esModule = embed "harness.js"),
      (name = "failure.js", esModule = embed "failure.js"),
      (name = "vectors.json", json = embed "vectors.json"),
    ],
    compatibilityDate = %q))],
  sockets = [(name = "http", address = %q, service = "vectors")],
);
`, compatibilityDate, addr)
	r := startWorkerd(t, config, map[string][]byte{"harness.js": harness, "failure.js": js, "vectors.json": vj})
	r.waitHTTP(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("harness answered %d: %s\nstderr:\n%s", resp.StatusCode, body, r.stderr.String())
	}
	var got []result
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("harness JSON: %v: %s", err, body)
	}
	var gotRetries []retryOut
	if err := json.Unmarshal(getBody(t, ctx, "http://"+addr+"/retries"), &gotRetries); err != nil {
		t.Fatalf("harness JSON: %v: %s", err, body)
	}
	if len(got) != len(vectors) {
		t.Fatalf("harness returned %d results for %d vectors", len(got), len(vectors))
	}
	retries := loadRetries(t)
	if len(gotRetries) != len(retries) {
		t.Fatalf("harness returned %d retry results for %d scenarios", len(gotRetries), len(retries))
	}
	for i, r := range retries {
		t.Run("retry/"+r.Name, func(t *testing.T) {
			want := r.Want
			want.Name = r.Name
			if goR := goRetry(t, r); gotRetries[i] != goR || goR != want {
				t.Errorf("source %s: js %+v, go %+v, want %+v", r.Source, gotRetries[i], goR, want)
			}
		})
	}
	for i, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			goR, want := goResult(v), wantResult(v)
			if !equalResult(got[i], goR) {
				t.Errorf("JavaScript and Go differ (source %s):\n  js %s\n  go %s", v.Source, fmtResult(got[i]), fmtResult(goR))
			}
			if !equalResult(got[i], want) {
				t.Errorf("JavaScript result (source %s):\n got %s\nwant %s", v.Source, fmtResult(got[i]), fmtResult(want))
			}
		})
	}
}

// TestRealWorkerdTerminations runs real Workers that die and classifies what the
// process left behind (issue 9, "Done means" 2).
func TestRealWorkerdTerminations(t *testing.T) {
	for _, tc := range []struct {
		name        string
		module      string
		extraWorker string
		extraConfig string
		request     bool // send a request to trigger the failure
		want        Cause
		wantIn      string // substring the evidence must hold (workerd-facts.md §6)
	}{
		{
			name:        "module throws at startup",
			module:      `throw new Error("startup kaboom");` + "\n",
			extraWorker: fmt.Sprintf(", compatibilityDate = %q", compatibilityDate),
			want:        CauseStartupError,
			wantIn:      "service main: Uncaught Error: startup kaboom",
		},
		{
			name:        "module throws at startup, structured logging",
			module:      `throw new Error("startup kaboom");` + "\n",
			extraWorker: fmt.Sprintf(", compatibilityDate = %q", compatibilityDate),
			extraConfig: "\n  logging = (structuredLogging = true),",
			want:        CauseStartupError,
			wantIn:      "service main: Uncaught Error: startup kaboom",
		},
		{
			name:   "no compatibilityDate",
			module: `export default { fetch() { return new Response("ok"); } };` + "\n",
			want:   CauseConfigError,
			wantIn: "service main: Worker must specify compatibilityDate.",
		},
		{
			name:        "experimental flag without --experimental",
			module:      `export default { fetch() { return new Response("ok"); } };` + "\n",
			extraWorker: fmt.Sprintf(", compatibilityDate = %q, compatibilityFlags = [\"service_binding_extra_handlers\"]", compatibilityDate),
			want:        CauseConfigError,
			wantIn:      "you must pass --experimental on the command line",
		},
		{
			name:        "V8 heap exhausted",
			module:      "export default { async fetch() { const a = []; for (;;) a.push(new Array(100000).fill(Math.random())); } };\n",
			extraWorker: fmt.Sprintf(", compatibilityDate = %q", compatibilityDate),
			extraConfig: "\n  v8Flags = [\"--max-old-space-size=16\"],",
			request:     true,
			want:        CauseOOM,
			wantIn:      "JavaScript heap out of memory",
		},
		{
			name:        "V8 heap exhausted, structured logging",
			module:      "export default { async fetch() { const a = []; for (;;) a.push(new Array(100000).fill(Math.random())); } };\n",
			extraWorker: fmt.Sprintf(", compatibilityDate = %q", compatibilityDate),
			extraConfig: "\n  v8Flags = [\"--max-old-space-size=16\"],\n  logging = (structuredLogging = true),",
			request:     true,
			want:        CauseOOM,
			wantIn:      "Reached heap limit",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := testenv.FreeLoopbackAddr(t)
			r := startWorkerd(t, oneWorkerConfig("main", "main.js", addr, tc.extraWorker, tc.extraConfig), map[string][]byte{"main.js": []byte(tc.module)})
			if tc.request {
				r.waitHTTP(t, addr)
				ctx, cancel := context.WithTimeout(context.Background(), guard)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					t.Fatalf("the allocation loop answered %d; workerd should have aborted", resp.StatusCode)
				}
			}
			r.wait(t)
			tm := r.termination(t)
			if tm.ExitCode == 0 && tm.Signal == 0 {
				t.Fatalf("workerd exited 0; stdout:\n%s\nstderr:\n%s", r.stdout.String(), r.stderr.String())
			}
			cause, evidence := Diagnose(tm)
			t.Logf("exit code %d, signal %d; cause %s; evidence %q", tm.ExitCode, tm.Signal, cause, evidence)
			if cause != tc.want {
				t.Errorf("cause %s, want %s; termination message:\n%s", cause, tc.want, tm.Message)
			}
			if !strings.Contains(evidence, tc.wantIn) {
				t.Errorf("evidence %q lacks %q", evidence, tc.wantIn)
			}
		})
	}
}
