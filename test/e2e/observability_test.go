package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// obsModule answers by path: 200, 500, a thrown TypeError, a CPU-heavy 200 (its named
// entrypoint Heavy, through a service binding to itself), a Durable Object call
// (Counter.increment, two storage calls) and a workflow instance (Steps, two step.do);
// scheduled() logs.
const obsModule = `import { DurableObject, WorkerEntrypoint, WorkflowEntrypoint } from "cloudflare:workers";
` + counterClass + `export class Steps extends WorkflowEntrypoint {
  async run(event, step) {
    const a = await step.do("first", async () => 1);
    const b = await step.do("second", async () => a + 1);
    return { b };
  }
}
// Heavy burns CPU until ?ms= milliseconds have passed on workerd's clock, in chunks
// with a timer between them (a clock that advances only on I/O still advances), so its
// wall time is at least that on any machine.
export class Heavy extends WorkerEntrypoint {
  async fetch(req) {
    const ms = Number(new URL(req.url).searchParams.get("ms"));
    const t0 = Date.now();
    let x = 0;
    while (Date.now() - t0 < ms) {
      for (let i = 0; i < 1e6; i++) x = (x + i * 7) % 1000003;
      await new Promise((r) => setTimeout(r, 0));
    }
    return new Response(String(x));
  }
}
export default {
  async fetch(req, env) {
    switch (new URL(req.url).pathname) {
      case "/500": return new Response("no", { status: 500 });
      case "/throw": throw new TypeError("thrown on purpose");
      case "/cpu": return env.HEAVY.fetch(req);
      case "/do": return new Response(String(await env.COUNTER.getByName("obs").increment(1)));
      case "/wf": return Response.json({ id: (await env.FLOW.create()).id });
      default: return new Response("ok");
    }
  },
  async scheduled(ev) { console.log("cron", ev.cron); },
};`

// heavyMS is how long each /cpu burns CPU; heavyBelow and heavyAbove are bounds of
// buckets of the wall-time histogram (telemetry's: ..., .1, .25, .5, 1, 2.5, 5, 10, ...)
// below and well above it.
const heavyMS, heavyBelow, heavyAbove = 300, 0.25, 10

// The request mix of TestWorkerMetrics: GETs by path, and how many of each.
const (
	mixOK, mix500, mixThrow, mixCPU, mixDO, mixWF = 4, 2, 3, 2, 3, 1
	// stepsPerRun is the step.do calls of Steps.run.
	stepsPerRun = 2
)

// newObsMix creates the Worker obs-mix (1 replica) with its DurableObjectNamespace
// obs-count (class Counter, 1 shard) and Workflow obs-flow (class Steps) and waits until
// all three are Ready; it returns the Worker's pod, the shard pod and the engine pod.
func newObsMix(t *testing.T) (worker, shard, engine *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	w := newWorker(t, "obs-mix", "", 1)
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec.Source.Inline.Modules[0].Content = ptr.To(obsModule)
	w.Spec.Bindings = []fleetv1alpha1.Binding{
		{Name: "HEAVY", Service: &fleetv1alpha1.ServiceBinding{Name: "obs-mix", Entrypoint: "Heavy"}},
		{Name: "COUNTER", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: "obs-count"}},
		{Name: "FLOW", Workflow: &fleetv1alpha1.LocalObjectReference{Name: "obs-flow"}},
	}
	if err := k8sClient.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	wf := &fleetv1alpha1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "obs-flow"},
		Spec:       fleetv1alpha1.WorkflowSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "obs-mix"}, ClassName: "Steps"},
	}
	if err := k8sClient.Create(ctx, wf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), wf) })
	d := newCounterNamespace(t, "obs-count", "obs-mix", 1)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), d) })
	waitReady(t, wf, 4*time.Minute)
	waitWorkerReady(t, w.Name)
	pods := workerPods(t, w.Name)
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	return &pods[0], namedPod(t, render.ShardSetName(d.Name)+"-0"), namedPod(t, render.EngineSetName(wf.Name)+"-0")
}

func namedPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkerMetrics: through real workerd pods on the local cluster, a known mix of
// requests to a Worker (200s, 500s, thrown exceptions, a CPU-heavy path, a Durable
// Object call, a workflow instance) and one scheduled run (the manager's path, the
// trigger socket) appear with exactly those counts per outcome and entrypoint on the
// sidecar /metrics of the pod that ran each: the Worker's pod, the namespace's shard
// pod, the Workflow's engine pod. Scraped over the pod IP with the namespace's
// certificate, as the chart's PodMonitor does (docs/observability.md).
func TestWorkerMetrics(t *testing.T) {
	pod, shard, engine := newObsMix(t)
	base := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(podcontract.DefaultHTTPPort))
	testenv.GetAll(t, httpClient, base, map[string]testenv.Expect{
		"/": {N: mixOK, Status: 200}, "/500": {N: mix500, Status: 500}, "/throw": {N: mixThrow, Status: 500},
		fmt.Sprintf("/cpu?ms=%d", heavyMS): {N: mixCPU, Status: 200}, "/do": {N: mixDO, Status: 200}, "/wf": {N: mixWF, Status: 200},
	})
	body := fmt.Sprintf(`{"cron":"0 * * * *","scheduledTime":%d}`, time.Now().UnixMilli())
	if got, refused := call(pod, probe{method: http.MethodPost, path: "/scheduled", port: podcontract.TriggerPort, body: body},
		secretCert(t, managerNS, podcontract.ManagerCASecret)); refused || !strings.HasPrefix(got, "200") {
		t.Fatalf("scheduled: %s", got)
	}
	checkWorkerPod(t, pod)
	checkShardPod(t, shard)
	checkEnginePod(t, engine)
}

// seriesWant is a series total a test expects: Sum(name, labels...) == want.
type seriesWant struct {
	name   string
	labels []string
	want   float64
}

func checkSeries(t *testing.T, pod string, m testenv.Metrics, cases []seriesWant) {
	t.Helper()
	for _, c := range cases {
		if got := m.Sum(c.name, c.labels...); got != c.want {
			t.Errorf("pod %s: %s%v = %v, want %v", pod, c.name, c.labels, got, c.want)
		}
	}
}

// checkWorkerPod: every fetch of the mix and the scheduled run are invocations of the
// Worker's pod. Outcomes as a tail Worker sees them
// (https://developers.cloudflare.com/workers/observability/logs/tail-workers/,
// https://developers.cloudflare.com/workers/runtime-apis/handlers/tail/): an uncaught
// exception is "exception" (the client gets a 500), a returned 500 is "ok" with
// response status 500.
func checkWorkerPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	fetches := mixOK + mix500 + mixThrow + mixCPU + mixDO + mixWF
	// Each /cpu is two invocations: the default fetch and Heavy's.
	m := scrapeSidecar(t, pod.Status.PodIP, float64(fetches+mixCPU+1))
	inv, def := telemetry.InvocationsTotal, []string{"worker=obs-mix", "entrypoint=default"}
	heavy := []string{"worker=obs-mix", "entrypoint=Heavy", "handler=fetch"}
	checkSeries(t, pod.Name, m, []seriesWant{
		{inv, nil, float64(fetches + mixCPU + 1)},
		{inv, append(def, "handler=fetch", "outcome=ok", "status_class=2xx"), mixOK + mixCPU + mixDO + mixWF},
		{inv, append(def, "handler=fetch", "outcome=ok", "status_class=5xx"), mix500},
		{inv, append(def, "handler=fetch", "outcome=exception", "status_class=none"), mixThrow},
		{inv, append(def, "handler=scheduled", "outcome=ok", "status_class=none"), 1},
		{inv, append(heavy, "outcome=ok", "status_class=2xx"), mixCPU},
		{telemetry.ExceptionsTotal, []string{"worker=obs-mix", "name=TypeError"}, mixThrow},
		{telemetry.WallTimeSeconds, heavy, mixCPU},
		// workerd reports cpuTime 0 (docs/observability.md): no CPU observation.
		{telemetry.CPUTimeSeconds, nil, 0},
	})
	// Heavy ran at least heavyMS on workerd's clock: each of its wall times lies in a
	// bucket above heavyBelow, and (seconds, not milliseconds) at most heavyAbove.
	for _, b := range []struct {
		le, want float64
	}{{heavyBelow, 0}, {heavyAbove, mixCPU}} {
		if got := m.AtMost(telemetry.WallTimeSeconds, b.le, heavy...); got != b.want {
			t.Errorf("Heavy (%d ms each): %v wall times at most %vs, want %v", heavyMS, got, b.le, b.want)
		}
	}
}

// checkShardPod: each /do is one call of Counter.increment on the shard pod, an RPC
// invocation of the class, with its storage get and put.
func checkShardPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	m := scrapeSidecar(t, pod.Status.PodIP, mixDO)
	// The subrequest series have no method label (docs/observability.md).
	do := []string{"worker=obs-mix", "entrypoint=Counter", "handler=rpc"}
	checkSeries(t, pod.Name, m, []seriesWant{
		{telemetry.InvocationsTotal, nil, mixDO},
		{telemetry.InvocationsTotal, append(do, "method=increment", "execution_model=durableObject", "outcome=ok", "status_class=none"), mixDO},
		{telemetry.SubrequestsTotal, append(do, "kind=durable_object_storage_get"), mixDO},
		{telemetry.SubrequestsTotal, append(do, "kind=durable_object_storage_put"), mixDO},
	})
}

// checkEnginePod: each /wf instance is one run of Steps on the engine pod (one attempt:
// its steps succeed and it neither sleeps nor waits), an RPC invocation "run" of the
// class, with one jsRpcCall subrequest per step.do.
func checkEnginePod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	m := scrapeSidecar(t, pod.Status.PodIP, mixWF)
	run := []string{"worker=obs-mix", "entrypoint=Steps", "handler=rpc"}
	checkSeries(t, pod.Name, m, []seriesWant{
		{telemetry.InvocationsTotal, nil, mixWF},
		{telemetry.InvocationsTotal, append(run, "method=run", "execution_model=stateless", "outcome=ok", "status_class=none"), mixWF},
		{telemetry.SubrequestsTotal, append(run, "kind=jsRpcCall"), stepsPerRun * mixWF},
	})
}

// scrapeSidecar scrapes the sidecar's /metrics on podIP:9092 with the namespace's
// certificate until the invocation total reaches n.
func scrapeSidecar(t *testing.T, podIP string, n float64) testenv.Metrics {
	t.Helper()
	hc := namespaceClient(t, sampleNS)
	url := "https://" + net.JoinHostPort(podIP, strconv.Itoa(podcontract.SidecarPort)) + "/metrics"
	var m testenv.Metrics
	eventually(t, time.Minute, "sidecar metrics", func() error {
		res, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /metrics: %s", res.Status)
		}
		if m, err = testenv.ParseMetrics(res.Body); err != nil {
			return err
		}
		if got := m.Sum(telemetry.InvocationsTotal); got < n {
			return fmt.Errorf("%v invocations, want %v", got, n)
		}
		return nil
	})
	return m
}
