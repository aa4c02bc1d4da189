package shim_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/shim"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

func TestNames(t *testing.T) {
	names := strings.Join(shim.Names(), ",")
	for _, n := range []string{shim.HealthModule, shim.TriggerModule} {
		if !strings.Contains(names, n) {
			t.Errorf("Names() = %s lacks %s", names, n)
		}
		if len(shim.MustSource(n)) == 0 {
			t.Errorf("%s is empty", n)
		}
	}
	if _, err := shim.Source("nope.js"); err == nil || !strings.Contains(err.Error(), `"nope.js"`) {
		t.Errorf("Source(nope.js) error %v, want one naming the file", err)
	}
}

// start renders a minimal Worker and runs it in the pinned workerd, with the
// "sidecar" external service pointing at sidecarAddr.
func start(t *testing.T, sidecarAddr string) *localrun.Local {
	t.Helper()
	w := &v1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: v1alpha1.WorkerSpec{
			CompatibilityDate: "2025-06-01",
			Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{{
				Name: "worker.js", Type: v1alpha1.ModuleESModule,
				Content: ptr.To(`export default { async fetch() { return new Response("app"); }, async scheduled() {} };`),
			}}}},
		},
	}
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{
		Binary: testenv.WorkerdBinary(t), Dir: dir,
		Externals: map[string]string{podcontract.SidecarService: sidecarAddr},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Stop(); cancel() })
	return l
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestHealthReadiness: /readyz follows the sidecar's GET /healthz. The sidecar here is
// a plain HTTP server on 127.0.0.1 answering /healthz with a status the test sets (the
// sidecar's documented health contract), so readiness can be seen both ways.
func TestHealthReadiness(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusOK)
	var hits atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		w.WriteHeader(int(status.Load()))
		_, _ = io.WriteString(w, "store closed")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	l := start(t, ln.Addr().String())
	base := "http://" + l.Addrs[podcontract.HealthSocket]
	cases := []struct {
		name       string
		sidecar    int
		path       string
		wantStatus int
		want       string
	}{
		{"liveness", http.StatusOK, "/healthz", 200, "ok\n"},
		{"ready when sidecar healthy", http.StatusOK, "/readyz", 200, "ready\n"},
		{"not ready when sidecar unhealthy", http.StatusServiceUnavailable, "/readyz", 503, "not ready: sidecar /healthz answered 503: store closed\n"},
		{"liveness ignores sidecar", http.StatusServiceUnavailable, "/healthz", 200, "ok\n"},
		{"no drain without a gateway", http.StatusOK, "/_workerd-operator/drain", 404, "not found\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status.Store(int32(c.sidecar))
			code, body := do(t, http.MethodGet, base+c.path, "")
			if code != c.wantStatus || body != c.want {
				t.Fatalf("GET %s: %d %q, want %d %q", c.path, code, body, c.wantStatus, c.want)
			}
		})
	}
	if hits.Load() < 2 {
		t.Fatalf("sidecar /healthz was asked %d times, want at least 2", hits.Load())
	}
}

// TestTriggerMalformed: the trigger socket refuses malformed requests with 400/404/405
// and a JSON error, per docs/pod-contract.md.
func TestTriggerMalformed(t *testing.T) {
	l := start(t, "127.0.0.1:1")
	base := "http://" + l.Addrs[podcontract.TriggerSocket]
	cases := []struct {
		name, method, path, body string
		wantStatus               int
		want                     string
	}{
		{"not JSON", "POST", "/scheduled", "cron=x", 400, `{"error":"body is not JSON: `},
		{"array", "POST", "/scheduled", `[1]`, 400, `{"error":"body must be an object`},
		{"time as string", "POST", "/scheduled", `{"cron":"* * * * *","scheduledTime":"now"}`, 400, `{"error":"scheduledTime must be a number (ms since epoch)"}`},
		{"GET /scheduled", "GET", "/scheduled", "", 405, `{"error":"POST /scheduled only"}`},
		{"bad time query", "GET", "/cdn-cgi/local/scheduled?time=soon", "", 400, `{"error":"time must be a number (ms since epoch)"}`},
		{"unknown path", "GET", "/", "", 404, `{"error":"not found`},
		{"ok", "POST", "/scheduled", `{"cron":"* * * * *","scheduledTime":0}`, 200, `{"outcome":"ok","noRetry":false}`},
		{"batch not JSON", "POST", "/scheduled-batch", "x", 400, `{"error":"body is not JSON: `},
		{"batch without runs", "POST", "/scheduled-batch", `{}`, 400, `{"error":"body must be {\"runs\":[{\"cron\":string,\"scheduledTime\":number}, ...]} with 1 to 1000 runs"}`},
		{"batch bad run", "POST", "/scheduled-batch", `{"runs":[{"cron":"* * * * *","scheduledTime":0},{"cron":1,"scheduledTime":0}]}`, 400, `{"error":"runs[1].cron must be a string"}`},
		{"GET /scheduled-batch", "GET", "/scheduled-batch", "", 405, `{"error":"POST /scheduled-batch only"}`},
		{"batch ok", "POST", "/scheduled-batch", `{"runs":[{"cron":"* * * * *","scheduledTime":0}]}`, 200, `{"index":0,"outcome":"ok","noRetry":false}` + "\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := do(t, c.method, base+c.path, c.body)
			if code != c.wantStatus || !strings.HasPrefix(body, c.want) {
				t.Fatalf("%s %s: %d %q, want %d and prefix %q", c.method, c.path, code, body, c.wantStatus, c.want)
			}
		})
	}
}

// TestOwnerWait: the Durable Object router and the Workflow binding wait for an owner
// being replaced as long as render.OwnerWaitSeconds says, which Worker pods' grace
// periods include (internal/specs).
func TestOwnerWait(t *testing.T) {
	want := fmt.Sprintf("%d;", render.OwnerWaitSeconds*1000)
	for file, decl := range map[string]string{"router.js": "export const OWNER_WAIT_MS = ", "workflows-binding.js": "const WAIT_MS = "} {
		src := string(shim.MustSource(file))
		if !strings.Contains(src, "\n"+decl+want) {
			t.Errorf("%s does not declare %s%s", file, decl, want)
		}
	}
}
