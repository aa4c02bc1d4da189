package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// rollerModule is the Worker of TestRolloutsWithoutFailedCalls at code version code:
// GET /do?k= calls a Durable Object method, GET /doclass?k= answers the code version
// the Durable Object runs, GET /wf?id= creates a Workflow instance,
// reads its status and sends it its event, GET /sleeper?id= starts an instance that runs a
// step named after the code version, sleeps, then finishes.
func rollerModule(code string) string {
	return `import { DurableObject, WorkflowEntrypoint } from "cloudflare:workers";
const CODE = "` + code + `";
` + counterClass + `Counter.prototype.code = function () { return CODE; };
export class Flow extends WorkflowEntrypoint {
  async run(event, step) {
    if (event.payload?.sleeper) {
      const v = await step.do(CODE + " step", { retries: { limit: 0, delay: 0 } },
        async () => this.env.COUNTER.getByName("sleeper").increment(1));
      await step.sleep("nap", "30 seconds");
      return { v, code: CODE };
    }
    const ev = await step.waitForEvent("go", { type: "go", timeout: "1 hour" });
    return ev.payload;
  }
}
export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    const id = url.searchParams.get("id");
    try {
      if (url.pathname === "/do") {
        const v = await env.COUNTER.getByName(url.searchParams.get("k")).increment(1);
        return Response.json({ v, code: CODE, version: env.VERSION });
      }
      if (url.pathname === "/doclass") {
        return Response.json({ code: await env.COUNTER.getByName(url.searchParams.get("k")).code() });
      }
      if (url.pathname === "/wf") {
        const i = await env.WF.create({ id });
        const s = await i.status();
        await i.sendEvent({ type: "go", payload: id });
        return Response.json({ id, status: s.status, code: CODE });
      }
      if (url.pathname === "/sleeper") {
        const i = await env.WF.create({ id, params: { sleeper: true } });
        return Response.json({ id: i.id });
      }
      return new Response("not found\n", { status: 404 });
    } catch (e) {
      return new Response(String(e?.stack ?? e) + "\n", { status: 500 });
    }
  },
};
`
}

// newRoller creates the Worker roller (2 replicas) with its DurableObjectNamespace
// rollcount (2 shards) and Workflow rollflow, and waits until all three are Ready.
func newRoller(t *testing.T) (*fleetv1alpha1.Worker, *fleetv1alpha1.DurableObjectNamespace, *fleetv1alpha1.Workflow) {
	t.Helper()
	return newRollerAs(t, "roller", "rollcount", "rollflow")
}

// newRollerAs is newRoller with the three objects named name, dons and flow.
func newRollerAs(t *testing.T, name, dons, flow string) (*fleetv1alpha1.Worker, *fleetv1alpha1.DurableObjectNamespace, *fleetv1alpha1.Workflow) {
	t.Helper()
	ctx := context.Background()
	w := newWorker(t, name, "", 2)
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec.Source.Inline.Modules[0].Content = ptr.To(rollerModule("v1"))
	w.Spec.Bindings = []fleetv1alpha1.Binding{
		{Name: "COUNTER", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: dons}},
		{Name: "WF", Workflow: &fleetv1alpha1.LocalObjectReference{Name: flow}},
		{Name: "VERSION", Text: ptr.To("a")},
	}
	if err := k8sClient.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	wf := &fleetv1alpha1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: flow},
		Spec: fleetv1alpha1.WorkflowSpec{
			WorkerRef: fleetv1alpha1.LocalObjectReference{Name: name}, ClassName: "Flow",
			Concurrency: &fleetv1alpha1.WorkflowConcurrency{Limit: ptr.To[int32](100)},
		},
	}
	if err := k8sClient.Create(ctx, wf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), wf) })
	d := newCounterNamespace(t, dons, name, 2)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), d) })
	waitReady(t, wf, 4*time.Minute)
	waitReady(t, w, 4*time.Minute)
	return w, d, wf
}

// loadResult counts one phase of the client loop: requests, and answers by the code
// version (rollerModule's CODE) that gave them.
type loadResult struct {
	sent, ok, failed atomic.Int64
	mu               sync.Mutex
	codes            map[string]int
}

func (r *loadResult) answered(code string) {
	r.ok.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.codes == nil {
		r.codes = map[string]int{}
	}
	r.codes[code]++
}

// byCode is how many answers each code version gave.
func (r *loadResult) byCode() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.codes)
}

// loadLoop sends GET /do and GET /wf alternately to url at rate requests per second,
// each from its own goroutine (a slow answer does not slow the loop), into the phase
// *cur points at, until stop closes; wait returns when every answer is in.
type loadLoop struct {
	url      string
	rate     int
	cur      atomic.Pointer[loadResult]
	mu       sync.Mutex
	failures []string
	wg       sync.WaitGroup
	stop     chan struct{}
}

// paced calls send(i) for i = 0, 1, ... at rate per second until stop closes. On a
// schedule, not a ticker: a late send is made up at once, not dropped.
func paced(rate int, stop <-chan struct{}, send func(i int)) {
	start, every := time.Now(), time.Second/time.Duration(rate)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Until(start.Add(time.Duration(i) * every))):
		}
		send(i)
	}
}

func (l *loadLoop) run() {
	c := &http.Client{Timeout: 150 * time.Second}
	paced(l.rate, l.stop, func(i int) {
		path := fmt.Sprintf("/do?k=k%d", i%16)
		if i%2 == 1 {
			path = fmt.Sprintf("/wf?id=w%d", i)
		}
		res := l.cur.Load()
		res.sent.Add(1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			code, err := l.one(c, path)
			if err != nil {
				res.failed.Add(1)
				l.mu.Lock()
				l.failures = append(l.failures, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), path, err))
				l.mu.Unlock()
				return
			}
			res.answered(code)
		}()
	})
}

// one sends GET path and returns the code version that answered it.
func (l *loadLoop) one(c *http.Client, path string) (string, error) {
	resp, err := c.Get(l.url + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %.400s", resp.Status, b)
	}
	var answer struct{ Code string }
	if err := json.Unmarshal(b, &answer); err != nil {
		return "", fmt.Errorf("answer %.200q: %w", b, err)
	}
	return answer.Code, nil
}

// TestRolloutsWithoutFailedCalls: while a client calls a Durable Object method and
// env.WF.create/status/sendEvent through the Worker at 25 requests/s, the Worker's code
// changes, then a binding, then its shard pods are deleted, then its workerd moves to
// another release from npm (spec.runtime.version): every request succeeds. An
// instance sleeping across the code change, whose v2 renames its first step, runs the
// renamed step once, first attempt successful.
func TestRolloutsWithoutFailedCalls(t *testing.T) {
	w, d, wf := newRoller(t)
	url := serviceURL(t, "roller")
	for _, p := range []string{"/do?k=warm", "/wf?id=warm"} {
		eventually(t, 2*time.Minute, "warm-up "+p, func() error { _, err := get(url + p); return err })
	}
	l := &loadLoop{url: url, rate: 25, stop: make(chan struct{})}
	phases := []string{"steady", "code change", "binding change", "shard pods deleted", "workerd " + testenv.OtherWorkerdVersion, "after"}
	results := make([]*loadResult, len(phases))
	for i := range results {
		results[i] = &loadResult{}
	}
	l.cur.Store(results[0])
	start := time.Now()
	go l.run()
	time.Sleep(5 * time.Second)
	if _, err := get(url + "/sleeper?id=sleeper"); err != nil {
		t.Fatal(err)
	}

	l.cur.Store(results[1])
	changeWorker(t, w, d, wf, func(w *fleetv1alpha1.Worker) { w.Spec.Source.Inline.Modules[0].Content = ptr.To(rollerModule("v2")) })
	l.cur.Store(results[2])
	changeWorker(t, w, d, wf, func(w *fleetv1alpha1.Worker) { w.Spec.Bindings[2].Text = ptr.To("b") })
	l.cur.Store(results[3])
	replaceShardPods(t, d)
	l.cur.Store(results[4])
	changeWorker(t, w, d, wf, func(w *fleetv1alpha1.Worker) {
		w.Spec.Runtime = &fleetv1alpha1.RuntimeSpec{Version: testenv.OtherWorkerdVersion}
	})
	checkWorkerdRelease(t, testenv.OtherWorkerdVersion)
	l.cur.Store(results[5])
	time.Sleep(5 * time.Second)
	close(l.stop)
	elapsed := time.Since(start)
	l.wg.Wait()

	var sent, failed int64
	for i, r := range results {
		sent, failed = sent+r.sent.Load(), failed+r.failed.Load()
		t.Logf("%-20s sent %5d  ok %5d  failed %d", phases[i], r.sent.Load(), r.ok.Load(), r.failed.Load())
	}
	rate := float64(sent) / elapsed.Seconds()
	fmt.Printf("rollouts: %d requests sent in %s (%.1f/s), %d failed\n", sent, elapsed.Round(time.Second), rate, failed)
	if failed != 0 {
		t.Errorf("%d of %d requests failed:\n%s", failed, sent, strings.Join(l.failures[:min(len(l.failures), 30)], "\n"))
	}
	if rate < 20 {
		t.Errorf("client rate %.1f/s, want at least 20", rate)
	}
	checkRenamedStep(t, wf)
}

// checkWorkerdRelease: every pod of the roller (Worker, shards, engine) runs the
// workerd image tagged version, which the local cluster runs as that npm release's
// binary (its --version names the release's date).
func checkWorkerdRelease(t *testing.T, version string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(sampleNS)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, "roller-") && !strings.HasPrefix(p.Name, "rollcount-") && !strings.HasPrefix(p.Name, "rollflow-") {
			continue
		}
		for _, c := range p.Spec.Containers {
			if c.Name != podcontract.WorkerdContainer {
				continue
			}
			n++
			if !strings.HasSuffix(c.Image, ":"+version) {
				t.Errorf("pod %s runs %s, want workerd %s", p.Name, c.Image, version)
				continue
			}
			bin, err := suiteImageMapping.Binary(c.Image)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "--version").Output()
			date := version[2:6] + "-" + version[6:8] + "-" + version[8:10]
			if err != nil || !strings.Contains(string(out), date) {
				t.Errorf("%s (for %s) --version: %q %v, want %s", bin, c.Image, out, err, date)
			}
		}
	}
	if n < 5 { // 2 Worker pods, 2 shards, 1 engine
		t.Errorf("%d roller pods run workerd, want 5", n)
	}
}

// changeWorker applies change to w and waits until the Worker, its shards and its
// engine have rolled out: their pod sets run the new template, all ready, no pod
// left terminating.
func changeWorker(t *testing.T, w *fleetv1alpha1.Worker, d *fleetv1alpha1.DurableObjectNamespace, wf *fleetv1alpha1.Workflow, change func(*fleetv1alpha1.Worker)) {
	t.Helper()
	ctx := context.Background()
	sets := map[string]int64{render.ShardSetName(d.Name): 0, render.EngineSetName(wf.Name): 0}
	for name := range sets {
		sts := &appsv1.StatefulSet{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, sts); err != nil {
			t.Fatal(err)
		}
		sets[name] = sts.Generation
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(w.DeepCopy())
	change(w)
	if err := k8sClient.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	eventually(t, 6*time.Minute, "rollout", func() error {
		for name, gen := range sets {
			if err := statefulSetRolled(ctx, name, gen); err != nil {
				return err
			}
		}
		return workerRolled(ctx, w.Name)
	})
	t.Logf("rolled out in %s", time.Since(began).Round(time.Second))
}

// statefulSetRolled: StatefulSet name has a generation past gen, fully updated and ready.
func statefulSetRolled(ctx context.Context, name string, gen int64) error {
	sts := &appsv1.StatefulSet{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, sts); err != nil {
		return err
	}
	st := sts.Status
	want := *sts.Spec.Replicas
	if sts.Generation <= gen || st.ObservedGeneration < sts.Generation || st.CurrentRevision != st.UpdateRevision ||
		st.UpdatedReplicas != want || st.ReadyReplicas != want {
		return fmt.Errorf("statefulset %s: generation %d (was %d) observed %d, revision %s -> %s, updated %d ready %d of %d",
			name, sts.Generation, gen, st.ObservedGeneration, st.CurrentRevision, st.UpdateRevision, st.UpdatedReplicas, st.ReadyReplicas, want)
	}
	return nil
}

// workerRolled: the Worker is Ready at its generation and none of its pods is terminating.
func workerRolled(ctx context.Context, name string) error {
	dep := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, dep); err != nil {
		return err
	}
	st := dep.Status
	if st.ObservedGeneration < dep.Generation || st.UpdatedReplicas != *dep.Spec.Replicas || st.ReadyReplicas != *dep.Spec.Replicas || st.Replicas != *dep.Spec.Replicas {
		return fmt.Errorf("deployment %s: observed %d of %d, updated %d ready %d replicas %d", name, st.ObservedGeneration, dep.Generation, st.UpdatedReplicas, st.ReadyReplicas, st.Replicas)
	}
	pods := &corev1.PodList{}
	if err := k8sClient.List(ctx, pods, client.InNamespace(sampleNS), client.MatchingLabels{podcontract.LabelWorker: name}); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s still terminating", p.Name)
		}
	}
	return nil
}

// replaceShardPods deletes every shard pod of d and waits until all are replaced and ready.
func replaceShardPods(t *testing.T, d *fleetv1alpha1.DurableObjectNamespace) {
	t.Helper()
	ctx := context.Background()
	old := map[string]string{}
	for i := int32(0); i < *d.Spec.Shards; i++ {
		p := &corev1.Pod{}
		name := fmt.Sprintf("%s-%d", render.ShardSetName(d.Name), i)
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		old[name] = string(p.UID)
		if err := k8sClient.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	eventually(t, 4*time.Minute, "shard pods replaced", func() error {
		for name, uid := range old {
			p := &corev1.Pod{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, p); err != nil {
				return err
			}
			if string(p.UID) == uid || !podReady(p) {
				return fmt.Errorf("%s not replaced and ready yet (%s)", name, cluster.PodRunInfo(sampleNS, name))
			}
		}
		return nil
	})
	t.Logf("shard pods replaced in %s", time.Since(began).Round(time.Second))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkRenamedStep: instance sleeper ran its first step under v1, slept across the code
// change and completed under v2, whose renamed step ran once, its first attempt ok.
func checkRenamedStep(t *testing.T, wf *fleetv1alpha1.Workflow) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: render.EngineSetName(wf.Name) + "-0"}, pod); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("https://%s:%d/workflows/%s/instances/sleeper", pod.Status.PodIP, podcontract.SidecarPort, wf.Name)
	hc := namespaceClient(t, sampleNS)
	var in api.Instance
	eventually(t, 2*time.Minute, "sleeper complete", func() error {
		body, err := getWith(hc, base)
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			return err
		}
		if in.Status != api.StatusComplete {
			return fmt.Errorf("status %s (error %+v)", in.Status, in.Error)
		}
		return nil
	})
	body, err := getWith(hc, base+"/steps")
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Steps []api.Step }
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	byName := map[string]api.Step{}
	for _, s := range out.Steps {
		byName[s.Name] = s
	}
	v1, v2 := byName["v1 step"], byName["v2 step"]
	t.Logf("sleeper output %s; v1 step attempts %d, v2 step attempts %d (%+v)", in.Output, len(v1.Attempts), len(v2.Attempts), v2.Attempts)
	if !v1.Done || !v2.Done || len(v2.Attempts) != 1 || v2.Attempts[0].Error != nil || v2.Error != nil {
		t.Errorf("steps %s: want v1 step and v2 step done, v2 step with one successful attempt", body)
	}
}

// namespaceClient is an HTTPS client presenting namespace ns's own certificate (Secret
// podcontract.InternalTLSSecret), as the namespace's pods do on the cross-pod ports.
func namespaceClient(t *testing.T, ns string) *http.Client {
	t.Helper()
	sec := &corev1.Secret{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: podcontract.InternalTLSSecret}, sec); err != nil {
		t.Fatal(err)
	}
	d := sec.Data
	cfg, err := internalca.ClientConfig(d[podcontract.InternalTLSCert], d[podcontract.InternalTLSKey], d[podcontract.InternalTLSCA], ns)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}
