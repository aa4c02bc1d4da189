package render_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// mixWorker answers by path: 200, 500, a thrown TypeError, a CPU-heavy 200; its
// scheduled handler logs the cron.
const mixWorker = `export default {
  async fetch(req) {
    const u = new URL(req.url);
    console.log("path", u.pathname);
    switch (u.pathname) {
      case "/500": return new Response("no", { status: 500 });
      case "/throw": throw new TypeError("thrown on purpose");
      case "/cpu": { let x = 0; for (let i = 0; i < 3e7; i++) x = (x + i * 7) % 1000003; return new Response(String(x)); }
      default: return new Response("ok");
    }
  },
  async scheduled(ev) { console.warn("cron", ev.cron); },
};`

// metricsOf scrapes GET /metrics of a sidecar's loopback listener.
type metricsOf struct {
	t    testing.TB
	addr string
	fams testenv.Metrics
}

func (m *metricsOf) scrape() {
	m.t.Helper()
	res, err := http.Get("http://" + m.addr + "/metrics")
	if err != nil {
		m.t.Fatal(err)
	}
	defer res.Body.Close()
	if m.fams, err = testenv.ParseMetrics(res.Body); err != nil {
		m.t.Fatal(err)
	}
}

func (m *metricsOf) sum(name string, want ...string) float64 { return m.fams.Sum(name, want...) }

// seriesCase is a series total a test expects: sum(name, labels...) == want.
type seriesCase struct {
	name   string
	labels []string
	want   float64
}

// check compares the last scrape with cases; output is the workerd output to show.
func (m *metricsOf) check(cases []seriesCase, output string) {
	m.t.Helper()
	for _, c := range cases {
		if got := m.sum(c.name, c.labels...); got != c.want {
			m.t.Errorf("%s%v = %v, want %v\nworkerd:\n%s", c.name, c.labels, got, c.want, output)
		}
	}
}

// waitFor scrapes until name's total reaches n (records arrive after the responses).
func (m *metricsOf) waitFor(name string, n float64) {
	m.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m.scrape()
		if got := m.sum(name); got >= n || time.Now().After(deadline) {
			return
		}
	}
}

// startTelemetrySidecar runs a real sidecar whose log lines go to logs.
func startTelemetrySidecar(t testing.TB, logs io.Writer) string {
	t.Helper()
	return startSidecarWith(t, sidecar.Options{Logs: logs})
}

// startSidecarWith runs a real sidecar with o on a free loopback address (and a data
// directory of the test's) until the test ends and returns that address.
func startSidecarWith(t testing.TB, o sidecar.Options) string {
	t.Helper()
	o.Addr, o.DataDir = testenv.FreeLoopbackAddr(t), t.TempDir()
	srv, err := sidecar.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return o.Addr
}

// Through the pinned workerd: a known mix of requests and a scheduled run produce
// exactly the expected counts per handler, outcome and status class on the sidecar's
// /metrics, and JSON log lines naming the Worker, trigger and request id.
func TestTailMetricsMix(t *testing.T) {
	var logs syncBuf
	sc := startTelemetrySidecar(t, &logs)
	l := startRendered(t, render.Input{Worker: inlineWorker("mix", mixWorker)}, sc)
	base := "http://" + l.Addrs[podcontract.HTTPSocket]
	mix := map[string]testenv.Expect{"/": {N: 5, Status: 200}, "/500": {N: 3, Status: 500}, "/throw": {N: 2, Status: 500}, "/cpu": {N: 2, Status: 200}}
	testenv.GetAll(t, http.DefaultClient, base, mix)
	body := fmt.Sprintf(`{"cron":"*/5 * * * *","scheduledTime":%d}`, time.Now().UnixMilli())
	res, err := http.Post("http://"+l.Addrs[podcontract.TriggerSocket]+"/scheduled", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	m := &metricsOf{t: t, addr: sc}
	m.waitFor(telemetry.InvocationsTotal, 13)
	checkMix(t, m, l.Output())
	checkMixLogs(t, logs.String())
}

func checkMix(t *testing.T, m *metricsOf, output string) {
	t.Helper()
	inv := telemetry.InvocationsTotal
	m.check([]seriesCase{
		{inv, nil, 13},
		{inv, []string{"worker=mix", "entrypoint=default", "handler=fetch", "execution_model=stateless", "outcome=ok", "status_class=2xx"}, 7},
		{inv, []string{"handler=fetch", "outcome=ok", "status_class=5xx"}, 3},
		{inv, []string{"handler=fetch", "outcome=exception", "status_class=none"}, 2},
		{inv, []string{"handler=scheduled", "outcome=ok", "status_class=none"}, 1},
		{telemetry.ExceptionsTotal, []string{"worker=mix", "handler=fetch", "name=TypeError"}, 2},
		{telemetry.LogsTotal, []string{"worker=mix", "level=log"}, 12},
		{telemetry.LogsTotal, []string{"worker=mix", "level=warn"}, 1},
		{telemetry.WallTimeSeconds, []string{"handler=fetch"}, 12},
		// The pinned workerd reports cpuTime 0: no CPU observation (docs/observability.md).
		{telemetry.CPUTimeSeconds, nil, 0},
		{telemetry.LabelOverflowTotal, nil, 0},
	}, output)
}

func checkMixLogs(t *testing.T, logs string) {
	t.Helper()
	for _, want := range []string{
		`"type":"log","level":"log","worker":"mix","entrypoint":"default","trigger":"fetch","requestId":"`,
		`"message":"path /throw"`,
		`"type":"exception","level":"error","worker":"mix","entrypoint":"default","trigger":"fetch","requestId":"`,
		`"name":"TypeError","message":"thrown on purpose","stack":"`,
		`"level":"warn","worker":"mix","entrypoint":"default","trigger":"scheduled"`,
		`"message":"cron */5 * * * *"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("sidecar log lines lack %s:\n%s", want, logs)
		}
	}
}

// syncBuf is a bytes.Buffer safe for the sidecar's writes and the test's reads.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sidecarOf is the sidecar address a test process was started with.
func sidecarOf(t testing.TB, p *proc) string {
	t.Helper()
	for _, a := range p.args {
		if v, ok := strings.CutPrefix(a, "--external-addr="+podcontract.SidecarService+"="); ok {
			return v
		}
	}
	t.Fatal("process has no sidecar")
	return ""
}

// Through a rendered Durable Object shard on the pinned workerd: the Worker's fetch, the
// class's RPC methods (an exception among them) and its alarm are counted per entrypoint
// (the class) and method, with the fetch's subrequests by kind.
func TestTailMetricsDurableObject(t *testing.T) {
	w, d := doFixture(t)
	d.Spec.Shards = ptr.To[int32](1)
	c := startDOClusterFor(t, w, d, 0)
	shard := c.shards[0]
	for _, q := range []string{"/inc?name=a", "/inc?name=a", "/boom?name=a&msg=bad", "/alarm?name=a&ms=1"} {
		path, query, _ := strings.Cut(q, "?")
		vals, _ := url.ParseQuery(query)
		c.get(t, shard, path, vals)
	}
	m := &metricsOf{t: t, addr: sidecarOf(t, shard)}
	m.waitFor(telemetry.InvocationsTotal, 9)
	inv, sub := telemetry.InvocationsTotal, telemetry.SubrequestsTotal
	do := []string{"worker=counter", "entrypoint=Counter"}
	m.check([]seriesCase{
		{inv, nil, 9},
		{inv, []string{"worker=counter", "entrypoint=default", "handler=fetch", "method=", "outcome=ok", "status_class=2xx"}, 3},
		{inv, []string{"entrypoint=default", "handler=fetch", "status_class=5xx"}, 1},
		{inv, append(do, "handler=rpc", "method=increment", "execution_model=durableObject", "outcome=ok", "status_class=none"), 2},
		{inv, append(do, "handler=rpc", "method=setAlarmIn", "outcome=ok"), 1},
		// The error of a throwing RPC method travels to the caller (its 500 above);
		// workerd reports the method's invocation itself as ok.
		{inv, append(do, "handler=rpc", "method=boom", "outcome=ok"), 1},
		{inv, append(do, "handler=alarm", "method=", "outcome=ok"), 1},
		{sub, []string{"entrypoint=default", "handler=fetch", "kind=durable_object_subrequest"}, 4},
		{sub, append(do, "handler=rpc", "kind=durable_object_storage_get"), 2},
		{sub, append(do, "handler=rpc", "kind=durable_object_storage_put"), 2},
		{sub, append(do, "handler=rpc", "kind=durable_object_storage_setAlarm"), 1},
		{sub, append(do, "kind=jsRpcCall"), 0},
		{telemetry.WallTimeSeconds, append(do, "handler=rpc"), 4},
	}, shard.output())
}

// Through a rendered workflow engine on the pinned workerd: the Worker's fetches (create
// and status polls) and the workflow's run, with its step, are counted per entrypoint.
func TestTailMetricsWorkflow(t *testing.T) {
	e := startWorkflowEngine(t)
	st, calls := e.runGreet("w1")
	if st["status"] != "complete" {
		t.Fatalf("status %v\n%s", st, e.logs.String())
	}
	m := &metricsOf{t: t, addr: e.sidecar}
	m.waitFor(telemetry.InvocationsTotal, float64(calls)+1)
	inv := telemetry.InvocationsTotal
	wf := []string{"worker=app", "entrypoint=Greeter", "handler=rpc"}
	m.check([]seriesCase{
		{inv, nil, float64(calls) + 1},
		{inv, []string{"worker=app", "entrypoint=default", "handler=fetch", "outcome=ok", "status_class=2xx"}, float64(calls)},
		{inv, append(wf, "method=run", "outcome=ok", "execution_model=stateless"), 1},
		// step.do is a call on the step object the runner hands to run() (an RpcTarget).
		{telemetry.SubrequestsTotal, append(wf, "kind=jsRpcCall"), 1},
	}, e.logs.String())
}

// collectorWorker is a tail consumer: its tail() logs what it received.
const collectorWorker = `export default {
  async fetch() { return new Response("collector"); },
  tail(events) {
    for (const e of events) console.log("tailed " + e.outcome + " " + new URL(e.event.request.url).pathname + " logs=" + e.logs.map((l) => l.message.join(" ")).join("|"));
  },
};`

func inlineWorker(name, js string) *v1alpha1.Worker {
	return &v1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: v1alpha1.WorkerSpec{CompatibilityDate: "2025-06-01", Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{
			Modules: []v1alpha1.Module{{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: ptr.To(js)}}}}},
	}
}

// startRendered renders in and runs it on the pinned workerd with the given sidecar.
func startRendered(t testing.TB, in render.Input, sidecarAddr string) *localrun.Local {
	t.Helper()
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return startFiles(t, out.Files, sidecarAddr)
}

// startFiles runs rendered files on the pinned workerd with the given sidecar.
func startFiles(t testing.TB, files []render.File, sidecarAddr string) *localrun.Local {
	t.Helper()
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	l, err := localrun.StartLocal(context.Background(), localrun.LocalOptions{
		Binary: testenv.WorkerdBinary(t), Dir: dir, Externals: map[string]string{podcontract.SidecarService: sidecarAddr},
		Sockets: []string{podcontract.HTTPSocket, podcontract.RPCSocket, podcontract.HealthSocket, podcontract.TriggerSocket},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

// spec.tails: the tail Worker (another workerd process, reached on its rpc socket like a
// service binding's Worker) receives the Worker's tail events: outcome, request, logs.
func TestUserTailConsumer(t *testing.T) {
	collector := startRendered(t, render.Input{Worker: inlineWorker("collector", collectorWorker)}, startSidecar(t))
	app := inlineWorker("app", mixWorker)
	app.Spec.Tails = []v1alpha1.TailConsumer{{Service: "collector"}}
	l := startRendered(t, render.Input{Worker: app, Services: map[string]render.ServiceTarget{
		"collector": {Address: collector.Addrs[podcontract.RPCSocket]}}}, startSidecar(t))
	for _, p := range []string{"/", "/throw"} {
		res, err := http.Get("http://" + l.Addrs[podcontract.HTTPSocket] + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	want := []string{"tailed ok / logs=path /", "tailed exception /throw logs=path /throw"}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out := collector.Output()
		if strings.Contains(out, want[0]) && strings.Contains(out, want[1]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tail Worker's output lacks %q:\n%s\napp:\n%s", want, out, l.Output())
		}
	}
}

func TestTailsErrors(t *testing.T) {
	for _, c := range []struct {
		tail, want string
	}{
		{"app", "spec.tails[0].service: a Worker cannot be its own tail consumer"},
		{"nope", `spec.tails[0].service: Worker "nope" not found`},
	} {
		w := inlineWorker("app", mixWorker)
		w.Spec.Tails = []v1alpha1.TailConsumer{{Service: c.tail}}
		if _, err := render.Render(render.Input{Worker: w}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tail %q: error %v, want %q", c.tail, err, c.want)
		}
	}
}
