package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

const (
	// sharedDNS is the dispatch namespace of TestDispatchSharedPlacement.
	sharedDNS = "shared-customers"
	// sharedReason is the Ready reason of a Shared user Worker (fleetv1alpha1.ReasonShared).
	sharedReason = "Shared"
)

// isolationModule answers JSON of what its isolate sees: its env's keys and values,
// globalThis.__mark as it was before this request (set to its name when ?mark is given),
// and, for ?u=, what fetch() of that URL gave ("error ..." when refused).
func isolationModule(name string) string {
	return fmt.Sprintf(`export default {
  async fetch(request, env) {
    const q = new URL(request.url).searchParams;
    const mark = globalThis.__mark;
    if (q.has("mark")) globalThis.__mark = %[1]q;
    const out = { name: %[1]q, keys: Object.keys(env), env: JSON.stringify(env),
      mark: typeof mark === "undefined" ? "undefined" : String(mark) };
    if (q.has("u")) {
      try {
        const r = await fetch(q.get("u"));
        out.fetch = "fetch " + r.status;
      } catch (e) {
        out.fetch = "error " + e.message;
      }
    }
    return Response.json(out);
  },
};
`, name)
}

// isoReply is isolationModule's answer.
type isoReply struct {
	Name  string   `json:"name"`
	Keys  []string `json:"keys"`
	Env   string   `json:"env"`
	Mark  string   `json:"mark"`
	Fetch string   `json:"fetch"`
}

// sharedUserWorker is a Shared user Worker of dispatch namespace dns: no replicas (nor
// runtime, pod, service, outbound...), which admission refuses for Shared.
func sharedUserWorker(dns, name, module string, bindings ...fleetv1alpha1.Binding) *fleetv1alpha1.Worker {
	return &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: name},
		Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			DispatchNamespace: dns, DispatchPlacement: fleetv1alpha1.DispatchPlacementShared,
			Bindings: bindings,
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(module),
			}}}},
		},
	}
}

// newSharedUserWorker creates sharedUserWorker(dns, name, module, bindings...) and
// deletes it when the test ends.
func newSharedUserWorker(t testing.TB, dns, name, module string, bindings ...fleetv1alpha1.Binding) *fleetv1alpha1.Worker {
	t.Helper()
	w := sharedUserWorker(dns, name, module, bindings...)
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	return w
}

// waitShared waits until the Shared user Worker name is Ready at its generation, then
// checks the reason says Shared and that it has none of a Worker's own objects.
func waitShared(t testing.TB, name string) {
	t.Helper()
	w := waitWorkerReady(t, name) // Ready=True and observedGeneration = generation
	if c := meta.FindStatusCondition(w.Status.Conditions, fleetv1alpha1.ConditionReady); c.Reason != sharedReason {
		t.Errorf("Shared user Worker %s: Ready reason %q (%s), want %q", name, c.Reason, c.Message, sharedReason)
	}
	sharedHasNoChildren(t, name)
}

// sharedHasNoChildren: a Shared user Worker runs in its dispatch Workers' pods, so it
// has no Deployment, pods, Services or ConfigMaps of its own.
func sharedHasNoChildren(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Shared user Worker %s: Get Deployment %s = %v, want NotFound", name, name, err)
	}
	sel := client.MatchingLabels{podcontract.LabelWorker: name, podcontract.LabelComponent: podcontract.ComponentWorker}
	for _, l := range []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}} {
		if err := k8sClient.List(ctx, l, client.InNamespace(sampleNS), sel); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(l); n != 0 {
			t.Errorf("Shared user Worker %s has %d objects of its own in a %T, want none", name, n, l)
		}
	}
}

// sharedWantBody waits until GET u answers exactly want.
func sharedWantBody(t testing.TB, timeout time.Duration, u, want string) {
	t.Helper()
	eventually(t, timeout, "GET "+u, func() error {
		got, err := get(u)
		if err != nil || got != want {
			return fmt.Errorf("got %q, %v; want %q", got, err, want)
		}
		return nil
	})
}

// sharedDispatcher binds dispatch namespace dns as env.dispatcher (dispatcherModule's).
func sharedDispatcher(dns string) func(*fleetv1alpha1.WorkerSpec) {
	return func(s *fleetv1alpha1.WorkerSpec) {
		s.Bindings = []fleetv1alpha1.Binding{{Name: "dispatcher", DispatchNamespace: &fleetv1alpha1.DispatchNamespaceBinding{Namespace: dns}}}
	}
}

// TestDispatchSharedPlacement: Shared user Workers, which have no pods of their own, are
// reached by name through the dispatch Worker as Dedicated ones are, beside a Dedicated
// one of the same dispatch namespace; each runs in its own isolate that sees only its
// own bindings and reaches no cluster or private address; an edit of its code and its
// deletion reach the dispatch Worker within 30 s.
func TestDispatchSharedPlacement(t *testing.T) {
	newSharedUserWorker(t, sharedDNS, "shared-a", userModule("shared-a"), fleetv1alpha1.Binding{Name: "GREETING", Text: ptr.To("hi a")})
	newSharedUserWorker(t, sharedDNS, "shared-b", userModule("shared-b"))
	newSharedUserWorker(t, sharedDNS, "iso-a", isolationModule("iso-a"), fleetv1alpha1.Binding{Name: "SECRET_A", Text: ptr.To("a-only")})
	newSharedUserWorker(t, sharedDNS, "iso-b", isolationModule("iso-b"), fleetv1alpha1.Binding{Name: "SECRET_B", Text: ptr.To("b-only")})
	// A Shared user Worker of another dispatch namespace, which the platform must not reach.
	newSharedUserWorker(t, "shared-others", "shared-elsewhere", userModule("shared-elsewhere"))
	newDispatchWorker(t, "dedicated-c", userModule("dedicated-c"), func(s *fleetv1alpha1.WorkerSpec) { s.DispatchNamespace = sharedDNS })
	newDispatchWorker(t, "shared-platform", dispatcherModule, sharedDispatcher(sharedDNS))
	for _, name := range []string{"shared-a", "shared-b", "iso-a", "iso-b", "shared-elsewhere"} {
		waitShared(t, name)
	}
	waitWorkerReady(t, "dedicated-c")
	waitWorkerReady(t, "shared-platform")
	// The Dedicated one of the same dispatch namespace does have pods: the check above
	// tells placements apart.
	if n := len(workerPods(t, "dedicated-c")); n == 0 {
		t.Errorf("Dedicated user Worker dedicated-c has no pods")
	}
	base := serviceURL(t, "shared-platform")
	sharedRoutes(t, base)
	t.Run("body and WebSocket", func(t *testing.T) { dispatchedBodyAndWebSocketTo(t, base, "shared-a", "shared-b") })
	t.Run("isolation", func(t *testing.T) { sharedIsolation(t, base) })
	t.Run("maxSharedWorkers", sharedCapped)
	t.Run("update and delete", func(t *testing.T) { sharedUpdateAndDelete(t, base) })
}

// sharedCapped: a dispatch Worker whose binding allows one Shared user Worker loads the
// first it is asked for and answers 503 naming the setting for another, while Dedicated
// ones are not counted; its workerd container's memory limit grows by
// SharedWorkerMiB for the one it may hold.
func sharedCapped(t *testing.T) {
	newDispatchWorker(t, "shared-capped", dispatcherModule, func(s *fleetv1alpha1.WorkerSpec) {
		s.Bindings = []fleetv1alpha1.Binding{{Name: "dispatcher", DispatchNamespace: &fleetv1alpha1.DispatchNamespaceBinding{Namespace: sharedDNS, MaxShared: ptr.To[int32](1)}}}
	})
	waitWorkerReady(t, "shared-capped")
	base := serviceURL(t, "shared-capped")
	sharedWantBody(t, time.Minute, base+"/shared-a/hello", "shared-a saw https://shared-a.sites.example/hello leaked=")
	got, err := get(base + "/iso-a/")
	if want := `dispatch: user Worker "iso-a" is not loaded: this pod holds its most Shared user Workers, 1 (the dispatchNamespace binding's maxSharedWorkers; docs/dispatch.md)`; err == nil || strings.TrimSpace(got) != want {
		t.Errorf("a second Shared user Worker past maxSharedWorkers 1: got %q, %v; want 503 %q", got, err, want)
	}
	sharedWantBody(t, time.Minute, base+"/dedicated-c/z", "dedicated-c saw https://dedicated-c.sites.example/z leaked=")
	sharedWantBody(t, time.Minute, base+"/shared-a/again", "shared-a saw https://shared-a.sites.example/again leaked=")
	pod := workerPods(t, "shared-capped")[0]
	for _, c := range pod.Spec.Containers {
		if c.Name != podcontract.WorkerdContainer {
			continue
		}
		want := resource.MustParse(fmt.Sprintf("%dMi", podcontract.WorkerdMemoryMiB(128)+fleetv1alpha1.SharedWorkerMiB))
		if got := c.Resources.Limits[corev1.ResourceMemory]; got.Cmp(want) != 0 {
			t.Errorf("workerd memory limit %s, want %s (the default 128 MiB heap's container plus one Shared user Worker)", got.String(), want.String())
		}
	}
}

// sharedRoutes: the platform reaches both placements of its dispatch namespace by name,
// each seeing the URL the dispatch Worker gave and none of the operator's headers; any
// other name is Cloudflare's "Worker not found"
// (https://developers.cloudflare.com/cloudflare-for-platforms/workers-for-platforms/).
func sharedRoutes(t *testing.T, base string) {
	// In order: the not-found rows run once the platform has shown it knows the Shared
	// Workers, so they cannot pass merely because it knows none yet.
	for _, c := range []struct{ path, want string }{
		{"/shared-a/hello", "shared-a saw https://shared-a.sites.example/hello leaked="},
		{"/shared-b/x/y", "shared-b saw https://shared-b.sites.example/x/y leaked="},
		{"/dedicated-c/z", "dedicated-c saw https://dedicated-c.sites.example/z leaked="},
		{"/nobody/", "caught: Worker not found: nobody"},
		{"/hello/", "caught: Worker not found: hello"},                       // outside any dispatch namespace
		{"/shared-elsewhere/", "caught: Worker not found: shared-elsewhere"}, // another dispatch namespace's
		{"/Not_A_Name/", "caught: Worker not found: Not_A_Name"},
	} {
		sharedWantBody(t, time.Minute, base+c.path, c.want)
	}
}

// isoGet calls isolationModule's Worker name through the platform with query q.
func isoGet(t *testing.T, base, name, q string) isoReply {
	t.Helper()
	var r isoReply
	eventually(t, time.Minute, name+"?"+q, func() error {
		body, err := get(base + "/" + name + "/?" + q)
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.Name != name {
			return fmt.Errorf("answer %q (%v), want %s's JSON", body, err, name)
		}
		return nil
	})
	return r
}

// sharedIsolation: Shared user Workers share the dispatch Worker's process but not an
// isolate: each sees only its own bindings and its own globals.
func sharedIsolation(t *testing.T, base string) {
	for _, c := range []struct{ name, key, own, other string }{
		{"iso-a", "SECRET_A", "a-only", "b-only"},
		{"iso-b", "SECRET_B", "b-only", "a-only"},
	} {
		r := isoGet(t, base, c.name, "")
		if !slices.Equal(r.Keys, []string{c.key}) {
			t.Errorf("%s: Object.keys(env) = %q, want only its own [%s]", c.name, r.Keys, c.key)
		}
		if !strings.Contains(r.Env, c.own) || strings.Contains(r.Env, c.other) {
			t.Errorf("%s: env = %s, want its own %q and not the other's %q", c.name, r.Env, c.own, c.other)
		}
	}
	// iso-a's mark persists across its calls (one isolate, loaded once); iso-b, called
	// after iso-a set it, sees none: separate isolates.
	for _, c := range []struct{ name, want string }{
		{"iso-a", "undefined"}, {"iso-a", "iso-a"}, {"iso-b", "undefined"}, {"iso-b", "iso-b"},
	} {
		if r := isoGet(t, base, c.name, "mark=1"); r.Mark != c.want {
			t.Errorf("%s: globalThis.__mark before this call = %q, want %q", c.name, r.Mark, c.want)
		}
	}
	sharedEgressDenied(t, base)
}

// sharedEgressDenied: a Shared user Worker's fetch() reaches neither its dispatch
// Worker's pod (its http port, the sidecar's ports, by pod IP or loopback), nor the
// Kubernetes API, nor any cluster Service, though it runs in that very pod.
func sharedEgressDenied(t *testing.T, base string) {
	pod := workerPods(t, "shared-platform")[0]
	ports := []int32{httpPort(pod), podcontract.HealthPort, podcontract.TriggerPort, podcontract.SidecarPort, podcontract.RPCPort}
	var targets []string
	for _, port := range ports {
		for _, host := range []string{pod.Status.PodIP, podcontract.LoopbackHost} {
			targets = append(targets, "http://"+net.JoinHostPort(host, strconv.Itoa(int(port)))+"/")
		}
	}
	for _, f := range podcontract.FrontedSockets { // the sidecar's sockets' inner side
		targets = append(targets, "http://"+net.JoinHostPort(podcontract.LoopbackHost, strconv.Itoa(int(f.InnerPort)))+"/")
	}
	api, err := cluster.Client().CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Plain http to the API server's TLS port: allowed, it would answer 400, not an error.
	apiPort := strconv.Itoa(int(api.Spec.Ports[0].Port))
	targets = append(targets,
		"http://"+net.JoinHostPort(api.Spec.ClusterIP, apiPort)+"/",
		"http://"+net.JoinHostPort("kubernetes.default.svc.cluster.local", apiPort)+"/",
		helloByName(t)+"/")
	for _, u := range targets {
		if r := isoGet(t, base, "iso-a", "u="+url.QueryEscape(u)); !strings.HasPrefix(r.Fetch, "error ") {
			t.Errorf("iso-a: fetch(%s) = %q, want an error: user Workers reach no private or cluster address", u, r.Fetch)
		}
	}
}

// sharedUpdateAndDelete: a new module of a Shared user Worker and its deletion reach
// the dispatch Worker's pods within 30 s, without a rollout; the others stay loaded.
func sharedUpdateAndDelete(t *testing.T, base string) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: sampleNS, Name: "shared-b"}
	eventually(t, 30*time.Second, "update shared-b's module", func() error {
		w := &fleetv1alpha1.Worker{}
		if err := k8sClient.Get(ctx, key, w); err != nil {
			return err
		}
		w.Spec.Source.Inline.Modules[0].Content = ptr.To(module("shared-b v2"))
		return k8sClient.Update(ctx, w) // a conflict is retried
	})
	sharedWantBody(t, 30*time.Second, base+"/shared-b/", "shared-b v2")
	waitShared(t, "shared-b") // Ready at the new generation, still without objects of its own
	w := &fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "shared-b"}}
	if err := k8sClient.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	// Cloudflare answers "Worker not found" for a deleted script as for an unknown one.
	sharedWantBody(t, 30*time.Second, base+"/shared-b/", "caught: Worker not found: shared-b")
	sharedWantBody(t, 30*time.Second, base+"/shared-a/hello", "shared-a saw https://shared-a.sites.example/hello leaked=")
}

// BenchmarkDispatchShared measures Shared placement at scale on the local cluster:
// $DISPATCH_SHARED_USERS (default 1000) Shared user Workers behind one dispatch Worker.
// It logs how long creating them and their becoming Ready took; first-call is one call
// to each (each loads its isolate); direct is a GET of a Dedicated Worker's Service,
// dispatched one through the dispatch Worker, round robin over all of them. It reports
// p50/p99 and logs the pods used and the dispatcher's memory before and after loading.
//
//	go test ./test/e2e -run '^$' -bench DispatchShared -benchtime 2000x
func BenchmarkDispatchShared(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("DISPATCH_SHARED_USERS")); err == nil && v > 0 {
		n = v
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("shared-bench-%d", i)
	}
	newDispatchWorker(b, "shared-bench-platform", dispatcherModule, func(s *fleetv1alpha1.WorkerSpec) {
		s.Bindings = []fleetv1alpha1.Binding{{Name: "dispatcher", DispatchNamespace: &fleetv1alpha1.DispatchNamespaceBinding{Namespace: "shared-bench", MaxShared: ptr.To(int32(n))}}}
	})
	newDispatchWorker(b, "shared-bench-direct", userModule("shared-bench-direct"), func(*fleetv1alpha1.WorkerSpec) {})
	created, ready := createSharedBench(b, names)
	b.Logf("%d Shared user Workers: created in %s, all Ready %s after the first create", n, created, ready)
	waitWorkerReady(b, "shared-bench-platform")
	waitWorkerReady(b, "shared-bench-direct")
	platform, direct := serviceURL(b, "shared-bench-platform"), serviceURL(b, "shared-bench-direct")
	dispatcher := workerPods(b, "shared-bench-platform")[0]
	rssBefore := sharedContainerRSS(dispatcher, podcontract.WorkerdContainer)
	rssAfter, loaded := rssBefore, 0
	var first []time.Duration
	b.Run("first-call", func(b *testing.B) {
		if first == nil { // later runs of this sub-benchmark would find the isolates loaded
			first = sharedFirstCalls(b, platform, names)
			rssAfter, loaded = sharedContainerRSS(dispatcher, podcontract.WorkerdContainer), len(first)
		}
		reportPercentiles(b, first)
		// The mean first call, not the b.N loop this sub-benchmark does not run.
		var sum time.Duration
		for _, d := range first {
			sum += d
		}
		b.ReportMetric(float64(sum.Nanoseconds())/float64(max(len(first), 1)), "ns/op")
	})
	b.Run("direct", func(b *testing.B) {
		benchGets(b, func(int) (string, string) { return direct + "/p", "shared-bench-direct saw " })
	})
	b.Run("dispatched", func(b *testing.B) {
		benchGets(b, func(i int) (string, string) {
			return platform + "/" + names[i%n] + "/p", names[i%n] + " saw "
		})
	})
	sharedBenchSummary(b, names, dispatcher, rssBefore, rssAfter, loaded)
}

// sharedBenchSummary logs the pods the benchmark used and the dispatcher's memory.
func sharedBenchSummary(b *testing.B, names []string, dispatcher corev1.Pod, before, after int64, loaded int) {
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(sampleNS),
		client.MatchingLabels{podcontract.LabelComponent: podcontract.ComponentWorker}); err != nil {
		b.Fatal(err)
	}
	shared := map[string]bool{}
	for _, name := range names {
		shared[name] = true
	}
	count := map[string]int{}
	for _, p := range pods.Items {
		switch w := p.Labels[podcontract.LabelWorker]; {
		case w == "shared-bench-platform", w == "shared-bench-direct":
			count[w]++
		case shared[w]:
			count["shared"]++
		}
	}
	if count["shared"] != 0 {
		b.Errorf("%d pods belong to Shared user Workers, want none", count["shared"])
	}
	perIsolate := int64(0)
	if loaded > 0 {
		perIsolate = (after - before) / int64(loaded)
	}
	b.Logf("pods used: %d (dispatch Worker %d, direct Worker %d, %d Shared user Workers %d); "+
		"dispatcher workerd RSS %d MiB before, %d MiB after loading %d isolates (%d KiB an isolate); its sidecar %d MiB",
		count["shared-bench-platform"]+count["shared-bench-direct"]+count["shared"],
		count["shared-bench-platform"], count["shared-bench-direct"], len(names), count["shared"],
		before>>20, after>>20, loaded, perIsolate>>10, sharedContainerRSS(dispatcher, podcontract.SidecarContainer)>>20)
}

// createSharedBench creates the Shared user Workers names concurrently, registers their
// deletion, and returns how long creating them and their all becoming Ready took.
func createSharedBench(b *testing.B, names []string) (created, ready time.Duration) {
	ctx := context.Background()
	ws := make([]*fleetv1alpha1.Worker, len(names))
	for i, name := range names {
		ws[i] = sharedUserWorker("shared-bench", name, userModule(name))
	}
	// Registered first, so that a failed run removes what it did create.
	b.Cleanup(func() {
		if err := sharedForEach(ws, func(w *fleetv1alpha1.Worker) error {
			return client.IgnoreNotFound(k8sClient.Delete(ctx, w))
		}); err != nil {
			b.Errorf("deleting the Shared user Workers: %v", err)
		}
	})
	start := time.Now()
	if err := sharedForEach(ws, func(w *fleetv1alpha1.Worker) error { return k8sClient.Create(ctx, w) }); err != nil {
		b.Fatal(err)
	}
	created = time.Since(start)
	sharedWaitAllReady(b, names, 10*time.Minute)
	return created, time.Since(start)
}

// sharedForEach runs f on each of ws from 16 goroutines; it returns the first error
// and how many failed.
func sharedForEach(ws []*fleetv1alpha1.Worker, f func(*fleetv1alpha1.Worker) error) error {
	var (
		next, failed atomic.Int64
		first        error
		once         sync.Once
		wg           sync.WaitGroup
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(ws)); i = next.Add(1) - 1 {
				if err := f(ws[i]); err != nil {
					failed.Add(1)
					once.Do(func() { first = fmt.Errorf("%s: %w", ws[i].Name, err) })
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return fmt.Errorf("%d of %d failed, first %w", failed.Load(), len(ws), first)
	}
	return nil
}

// sharedWaitAllReady waits until every Worker of names is Ready with reason Shared at
// its generation; one List a poll rather than a Get a Worker.
func sharedWaitAllReady(b *testing.B, names []string, timeout time.Duration) {
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
	}
	eventually(b, timeout, fmt.Sprintf("%d Shared user Workers Ready", len(names)), func() error {
		list := &fleetv1alpha1.WorkerList{}
		if err := k8sClient.List(context.Background(), list, client.InNamespace(sampleNS)); err != nil {
			return err
		}
		ready := 0
		for i := range list.Items {
			w := &list.Items[i]
			c := meta.FindStatusCondition(w.Status.Conditions, fleetv1alpha1.ConditionReady)
			if want[w.Name] && c != nil && c.Status == metav1.ConditionTrue && c.Reason == sharedReason &&
				w.Status.ObservedGeneration == w.Generation {
				ready++
			}
		}
		if ready != len(names) {
			return fmt.Errorf("%d of %d Ready with reason %s", ready, len(names), sharedReason)
		}
		return nil
	})
}

// sharedFirstCalls calls each of names once through the platform, each call loading
// that Worker's isolate, and returns their durations.
func sharedFirstCalls(b *testing.B, platform string, names []string) []time.Duration {
	durs := make([]time.Duration, 0, len(names))
	for _, name := range names {
		u, want := platform+"/"+name+"/p", name+" saw "
		var got string
		var err error
		var took time.Duration
		// "Worker not found" loads nothing: retried while the dispatcher may not yet know a
		// Worker that just became Ready; only the call that answers is timed.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			t0 := time.Now()
			got, err = get(u)
			took = time.Since(t0)
			if err != nil || !strings.HasPrefix(got, "caught: Worker not found") || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || !strings.HasPrefix(got, want) {
			b.Fatalf("first call %s: got %q, %v; want %q", u, got, err, want)
		}
		durs = append(durs, took)
	}
	return durs
}

// sharedContainerRSS is the resident memory in bytes of container c of pod p.
func sharedContainerRSS(p corev1.Pod, c string) int64 {
	var sum int64
	for _, pp := range cluster.PodProcesses(p.Namespace, p.Name) {
		if pp.Container == c {
			sum += procRSS(pp.PID)
		}
	}
	return sum
}
