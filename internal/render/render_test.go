package render_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the renderer's output")

// expectation is the test-only document (kind TestExpectation) of a testdata case.
type expectation struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Worker the requests go to; default the file's only (or last) Worker.
	Worker string `json:"worker"`
	// Run false: golden only (e.g. source.image).
	Run *bool `json:"run"`
	// StartupError: workerd must refuse to start with a message starting like this.
	StartupError string    `json:"startupError"`
	Requests     []request `json:"requests"`
}

type request struct {
	Socket     string `json:"socket"` // default http
	Method     string `json:"method"` // default GET
	Path       string `json:"path"`
	Body       string `json:"body"`
	Status     int    `json:"status"` // default 200
	Want       string `json:"want"`
	WantPrefix string `json:"wantPrefix"`
}

type testCase struct {
	name   string
	m      localrun.Manifests
	expect *expectation
}

func loadCases(t *testing.T) []testCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []testCase
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		c := testCase{name: strings.TrimSuffix(filepath.Base(p), ".yaml")}
		if err := localrun.DecodeManifests(f, p, &c.m); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for _, o := range c.m.Others {
			e := &expectation{}
			if err := yaml.UnmarshalStrict(o, e); err != nil {
				t.Fatalf("%s: TestExpectation: %v", p, err)
			}
			if e.Kind != "TestExpectation" {
				t.Fatalf("%s: unexpected kind %q", p, e.Kind)
			}
			c.expect = e
		}
		cases = append(cases, c)
	}
	if len(cases) < 15 {
		t.Fatalf("want at least 15 golden cases (issue 3), have %d", len(cases))
	}
	return cases
}

func formatAll(t *testing.T, c testCase) []byte {
	t.Helper()
	var b bytes.Buffer
	rs, err := localrun.RenderManifests(&c.m, render.Options{})
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
		return b.Bytes()
	}
	for _, r := range rs {
		if err := localrun.Format(&b, r.Worker, r.Output, false); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.name, func(t *testing.T) {
			got := formatAll(t, c)
			if again := formatAll(t, c); !bytes.Equal(got, again) {
				t.Fatalf("rendering is not deterministic")
			}
			golden := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (run go test -update to accept):\n--- got\n%s", golden, got)
			}
			// No secret value ever lands in a rendered file.
			for _, s := range c.m.Secrets {
				for k, v := range s.StringData {
					if bytes.Contains(got, []byte(v)) {
						t.Errorf("secret %s key %s: value appears in the rendered output", s.Name, k)
					}
				}
			}
		})
	}
}

// TestRunWorkerd starts the pinned workerd on every runnable case's rendered files on
// 127.0.0.1 and checks the response bodies the case's TestExpectation lists.
func TestRunWorkerd(t *testing.T) {
	bin := testenv.WorkerdBinary(t)
	for _, c := range loadCases(t) {
		if c.expect == nil || (c.expect.Run != nil && !*c.expect.Run) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			locals := startAll(t, bin, c)
			e := c.expect
			if e.StartupError != "" {
				return
			}
			target := e.Worker
			if target == "" {
				target = c.m.Workers[len(c.m.Workers)-1].Name
			}
			l := locals[target]
			for i, r := range e.Requests {
				socket := r.Socket
				if socket == "" {
					socket = podcontract.HTTPSocket
				}
				method := r.Method
				if method == "" {
					method = http.MethodGet
				}
				req, err := http.NewRequest(method, "http://"+l.Addrs[socket]+r.Path, strings.NewReader(r.Body))
				if err != nil {
					t.Fatal(err)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("request %d %s %s: %v", i, method, r.Path, err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				status := r.Status
				if status == 0 {
					status = http.StatusOK
				}
				if res.StatusCode != status {
					t.Errorf("request %d %s %s on %s: status %d, want %d; body %q\nworkerd output:\n%s", i, method, r.Path, socket, res.StatusCode, status, body, l.Output())
				}
				switch {
				case r.WantPrefix != "":
					if !strings.HasPrefix(string(body), r.WantPrefix) {
						t.Errorf("request %d %s %s on %s: body %q, want prefix %q", i, method, r.Path, socket, body, r.WantPrefix)
					}
				case string(body) != r.Want:
					t.Errorf("request %d %s %s on %s: body %q, want %q\nworkerd output:\n%s", i, method, r.Path, socket, body, r.Want, l.Output())
				}
			}
		})
	}
}

// startAll starts one workerd per Worker of c, targets of service bindings first, and
// points service bindings at the other processes' http sockets.
func startAll(t *testing.T, bin string, c testCase) map[string]*localrun.Local {
	t.Helper()
	locals := map[string]*localrun.Local{}
	pending := append([]*v1alpha1.Worker(nil), c.m.Workers...)
	for len(pending) > 0 {
		progressed := false
		for i := 0; i < len(pending); i++ {
			w := pending[i]
			services := map[string]render.ServiceTarget{}
			ready := true
			for _, b := range w.Spec.Bindings {
				kind, name := b.Reference()
				if kind != v1alpha1.ReferenceWorker || name == w.Name {
					continue
				}
				l, ok := locals[name]
				if !ok {
					ready = false
					break
				}
				services[name] = render.ServiceTarget{Address: l.Addrs[podcontract.RPCSocket]}
			}
			if !ready {
				continue
			}
			pending = append(pending[:i], pending[i+1:]...)
			i--
			progressed = true
			var cm *corev1.ConfigMap
			if cs := w.Spec.Source.ConfigMap; cs != nil {
				for _, x := range c.m.ConfigMaps {
					if x.Name == cs.Name {
						cm = x
					}
				}
			}
			out, err := render.Render(render.Input{Worker: w, ConfigMap: cm, Services: services})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := localrun.WriteFiles(dir, out.Files, out.External); err != nil {
				t.Fatal(err)
			}
			env, missing := localrun.SecretEnv(w, out, c.m.Secrets)
			externals, more, err := localrun.SecretFiles(w, out, c.m.Secrets, dir, env)
			if err != nil || len(missing)+len(more) > 0 {
				t.Fatalf("secrets missing from the case: %v %v (%v)", missing, more, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: bin, Dir: dir, Env: env, Externals: externals})
			if c.expect.StartupError != "" {
				cancel()
				se, ok := err.(*localrun.StartupError)
				if !ok {
					if l != nil {
						l.Stop()
					}
					t.Fatalf("want a startup error starting with %q, got %v", c.expect.StartupError, err)
				}
				found := false
				for _, m := range se.Messages {
					found = found || strings.HasPrefix(m, c.expect.StartupError)
				}
				if !found {
					t.Fatalf("startup error messages %q: none starts with %q", se.Messages, c.expect.StartupError)
				}
				return locals
			}
			if err != nil {
				cancel()
				t.Fatalf("Worker %s: %v", w.Name, err)
			}
			t.Cleanup(func() { l.Stop(); cancel() })
			locals[w.Name] = l
		}
		if !progressed {
			t.Fatalf("service bindings form a cycle or name a Worker outside the case")
		}
	}
	return locals
}

// The http socket does not open Cap'n Proto RPC (no capnpConnectHost): a service binding
// aimed at a Worker's http port cannot call its methods, only the rpc socket can. So a
// client of the http port (an Ingress) cannot reach the Worker's RPC entrypoints.
func TestHTTPSocketRefusesRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("starts workerd")
	}
	bin := testenv.WorkerdBinary(t)
	var c testCase
	for _, tc := range loadCases(t) {
		if tc.name == "09-service-binding" {
			c = tc
		}
	}
	if c.name == "" {
		t.Fatal("testdata/09-service-binding.yaml not found")
	}
	start := func(w *v1alpha1.Worker, services map[string]render.ServiceTarget) *localrun.Local {
		out, err := render.Render(render.Input{Worker: w, Services: services})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := localrun.WriteFiles(dir, out.Files); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: bin, Dir: dir})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Stop(); cancel() })
		return l
	}
	greeter := start(c.m.Workers[0], nil)
	for _, tc := range []struct {
		socket string
		ok     bool
	}{{podcontract.RPCSocket, true}, {podcontract.HTTPSocket, false}} {
		t.Run(tc.socket, func(t *testing.T) {
			caller := start(c.m.Workers[1], map[string]render.ServiceTarget{"greeter": {Address: greeter.Addrs[tc.socket]}})
			const want = "greeter saw /path/x | hello, caller (via rpc) | greeter refused"
			resp, err := http.Get("http://" + caller.Addrs[podcontract.HTTPSocket] + "/")
			got, status := "", 0
			if err == nil { // a refused RPC may also end the caller's response (EOF)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got, status = string(b), resp.StatusCode
			}
			if (status == 200 && got == want) != tc.ok {
				t.Fatalf("binding to the %s socket: %d %q %v (RPC should work: %v)", tc.socket, status, got, err, tc.ok)
			}
		})
	}
}
