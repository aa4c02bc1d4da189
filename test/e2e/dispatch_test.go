package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/deploy"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// dispatcherModule routes /<name>/<rest> to user Worker <name> of its dispatch
// namespace, as Cloudflare's dynamic dispatch example does, and reports the error a
// failed get().fetch() throws
// (https://developers.cloudflare.com/cloudflare-for-platforms/workers-for-platforms/configuration/custom-limits/).
const dispatcherModule = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const [, name, ...rest] = url.pathname.split("/");
    if (name === "_smuggle") {
      // The Cache API's requests carry the Worker's own headers to the sidecar.
      const r = await caches.default.match(new Request("http://smuggle.example/" + rest.join("/"), { headers: {
        "X-Workerd-Operator-Dispatch-Namespace": "customers", "X-Workerd-Operator-Dispatch-Script": "site-a" } }))
        .catch((e) => ({ status: "threw", text: async () => e.message }));
      return new Response("smuggled " + (r ? r.status + " " + (await r.text()) : "nothing"));
    }
    const target = "https://" + name + ".sites.example/" + rest.join("/") + url.search;
    try {
      return await env.dispatcher.get(name).fetch(new Request(target, request));
    } catch (e) {
      return new Response("caught: " + e.message);
    }
  },
};
`

// userModule answers with its name, what it was asked and whether any of the
// operator's internal headers reached it, or fetches ?u= (its outbound rules at work).
func userModule(name string) string {
	return fmt.Sprintf(`export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.searchParams.has("u")) {
      try {
        const r = await fetch(url.searchParams.get("u"));
        return new Response("fetch " + r.status);
      } catch (e) {
        return new Response("error " + e.message);
      }
    }
    if (request.headers.get("Upgrade") === "websocket") {
      const [client, server] = Object.values(new WebSocketPair());
      server.accept();
      server.addEventListener("message", (e) => server.send(%[1]q + " echo " + e.data));
      return new Response(null, { status: 101, webSocket: client });
    }
    if (url.searchParams.has("fake-not-found")) {
      return new Response("present", { headers: { "X-Workerd-Operator-Dispatch-Error": "not-found" } });
    }
    if (request.method === "POST") {
      return new Response(%[1]q + " got " + request.method + " " + (await request.text()));
    }
    const leaked = [...request.headers.keys()].filter((h) => h.startsWith("x-workerd-operator-"));
    return new Response(%[1]q + " saw " + url.protocol + "//" + url.host + url.pathname + " leaked=" + leaked.join(","));
  },
};
`, name)
}

// TestDispatchNamespace: a dispatch Worker reaches each user Worker of its dispatch
// namespace by name, a Worker outside it (the hello sample) and a name nobody deployed
// are "Worker not found"; a user Worker's code reaches neither another customer nor any
// cluster address, and only the dispatcher's pods may open its rpc port.
func TestDispatchNamespace(t *testing.T) {
	for _, name := range []string{"site-a", "site-b"} {
		newDispatchWorker(t, name, userModule(name), func(s *fleetv1alpha1.WorkerSpec) { s.DispatchNamespace = "customers" })
	}
	newDispatchWorker(t, "platform", dispatcherModule, func(s *fleetv1alpha1.WorkerSpec) {
		s.Bindings = []fleetv1alpha1.Binding{{Name: "dispatcher", DispatchNamespace: &fleetv1alpha1.DispatchNamespaceBinding{Namespace: "customers"}}}
	})
	for _, name := range []string{"site-a", "site-b", "platform"} {
		waitWorkerReady(t, name)
	}
	base := serviceURL(t, "platform")
	siteB := workerPods(t, "site-b")[0]
	for _, c := range []struct{ path, want string }{
		{"/site-a/hello", "site-a saw https://site-a.sites.example/hello leaked=."},
		{"/site-b/x/y", "site-b saw https://site-b.sites.example/x/y leaked=."},
		{"/site-a/?fake-not-found", "present."},
		{"/_smuggle/m", "smuggled nothing."},
		{"/hello/", "caught: Worker not found: hello"},
		{"/nobody/", "caught: Worker not found: nobody"},
		{"/Not_A_Name/", "caught: Worker not found: Not_A_Name"},
		{"/site-a/?u=" + url.QueryEscape(helloByName(t)+"/"), "error "},
		{"/site-a/?u=" + url.QueryEscape(fmt.Sprintf("http://%s/", net.JoinHostPort(siteB.Status.PodIP, fmt.Sprint(httpPort(siteB))))), "error "},
	} {
		eventually(t, time.Minute, c.path, func() error {
			got, err := get(base + c.path)
			// A want ending in "." is the whole answer, else its start.
			if exact, ok := strings.CutSuffix(c.want, "."); ok && err == nil && got == exact {
				return nil
			}
			if err != nil || !strings.HasPrefix(got, c.want) {
				return fmt.Errorf("got %q, %v; want %q", got, err, c.want)
			}
			return nil
		})
	}
	dispatchedBodyAndWebSocketTo(t, base, "site-a", "site-b")
	dispatchPoliciesRefuse(t, siteB)
	platform := workerPods(t, "platform")[0]
	if log, err := containerLog(platform, podcontract.SidecarContainer); err != nil || !strings.Contains(log, "(mutual TLS: true;") {
		t.Errorf("the dispatcher's sidecar does not say it calls over mutual TLS: %v\n%s", err, log)
	}
}

// dispatchedBodyAndWebSocketTo: a 1 MiB request body to user Worker postTo and a
// WebSocket to user Worker wsTo go through dispatch.
func dispatchedBodyAndWebSocketTo(t *testing.T, base, postTo, wsTo string) {
	body := strings.Repeat("x", 1<<20)
	resp, err := httpClient.Post(base+"/"+postTo+"/upload", "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := postTo + " got POST " + body; string(got) != want {
		t.Errorf("POST of 1 MiB through dispatch to %s: %d, %d bytes back, want %d", postTo, resp.StatusCode, len(got), len(want))
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/"+wsTo+"/ws", nil)
	if err != nil {
		t.Fatalf("WebSocket through dispatch to %s: %v", wsTo, err)
	}
	defer ws.Close()
	for _, m := range []string{"one", "two"} {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		if got, want := readText(t, ws), wsTo+" echo "+m; got != want {
			t.Errorf("WebSocket through dispatch: got %q, want %q", got, want)
		}
	}
}

// newDispatchWorker creates Worker name running module, with edit applied to its spec.
func newDispatchWorker(t testing.TB, name, module string, edit func(*fleetv1alpha1.WorkerSpec)) {
	t.Helper()
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: name},
		Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](1),
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(module),
			}}}},
		},
	}
	edit(&w.Spec)
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
}

// dispatchPoliciesRefuse: the NetworkPolicies let only the dispatcher's pod open the
// user Worker's rpc port, not another customer's nor an ordinary Worker's.
func dispatchPoliciesRefuse(t *testing.T, target corev1.Pod) {
	nps := &networkingv1.NetworkPolicyList{}
	if err := k8sClient.List(context.Background(), nps, client.InNamespace(sampleNS)); err != nil {
		t.Fatal(err)
	}
	eval := testenv.NetworkPolicies{Policies: nps.Items, Namespaces: map[string]map[string]string{sampleNS: {podcontract.LabelNamespaceName: sampleNS}}}
	for caller, want := range map[string]bool{"platform": true, "site-a": false, "hello": false} {
		from := workerPods(t, caller)[0]
		for _, port := range []int32{podcontract.RPCPort, httpPort(target)} {
			got, err := eval.Allowed(policyPod(&from), policyPod(&target), port)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("policy: %s → site-b :%d allowed %v, want %v", caller, port, got, want)
			}
		}
	}
}

// TestWorkerPublisherTemplate is the dispatch half of Done means 1 of issue 39:
// Cloudflare's worker-publisher-template, deployed unchanged by `deploy`. Its deploy
// script first uploads a user Worker (my-hello-world-script, with a plain_text binding
// MESSAGE) into dispatch namespace my-dispatch-namespace through Cloudflare's API with
// the official SDK, which deploy serves on loopback (CLOUDFLARE_BASE_URL), then runs
// wrangler deploy for the dispatch Worker (binding DISPATCHER). The dispatch Worker
// reaches the uploaded Worker by name, answers 404 "not found" for another name, and
// Cloudflare's own Playwright spec for it passes; with the upload Dedicated (its own
// pod) and Shared (loaded by the dispatch Worker's pod: deploy --dispatch-placement).
func TestWorkerPublisherTemplate(t *testing.T) {
	for _, p := range []fleetv1alpha1.DispatchPlacement{fleetv1alpha1.DispatchPlacementDedicated, fleetv1alpha1.DispatchPlacementShared} {
		t.Run(string(p), func(t *testing.T) { workerPublisherTemplate(t, p) })
	}
}

func workerPublisherTemplate(t *testing.T, placement fleetv1alpha1.DispatchPlacement) {
	const name = "worker-publisher-template"
	src := filepath.Join(repoRoot, "test", "testdata", "cloudflare-templates", name)
	dir, err := testenv.CopyProject(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	uploaded := &fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "my-hello-world-script"}}
	t.Cleanup(func() { deleteAndWait(t, uploaded) })
	d := deployDir(t, dir, func(o *deploy.Options) { o.DispatchPlacement = placement })
	if !slices.ContainsFunc(d.res.Import.Worker.Spec.Bindings, func(b fleetv1alpha1.Binding) bool {
		return b.Name == "DISPATCHER" && b.DispatchNamespace != nil && b.DispatchNamespace.Namespace == "my-dispatch-namespace"
	}) {
		t.Errorf("the deployed Worker has no DISPATCHER binding on my-dispatch-namespace: %+v", d.res.Import.Worker.Spec.Bindings)
	}
	user := &fleetv1alpha1.Worker{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: "my-hello-world-script"}, user); err != nil {
		t.Fatalf("the uploaded user Worker: %v", err)
	}
	if user.Spec.DispatchNamespace != "my-dispatch-namespace" || user.Spec.DispatchPlacement != placement && placement != fleetv1alpha1.DispatchPlacementDedicated {
		t.Errorf("uploaded Worker's dispatchNamespace %q, dispatchPlacement %q; want my-dispatch-namespace, %s", user.Spec.DispatchNamespace, user.Spec.DispatchPlacement, placement)
	}
	if pods := workerPods(t, user.Name); (len(pods) == 0) != (placement == fleetv1alpha1.DispatchPlacementShared) {
		t.Errorf("the uploaded %s user Worker has %d pods", placement, len(pods))
	}
	// deploy-wfp.ts's script answers env.MESSAGE, which its upload binds to "Hello World!".
	if got, err := get(d.url + "/my-hello-world-script"); err != nil || got != "Hello World!" {
		t.Errorf("GET /my-hello-world-script = %q, %v; want the user Worker's Hello World!", got, err)
	}
	resp, err := httpClient.Get(d.url + "/nobody-deployed-this")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || string(body) != "Worker 'nobody-deployed-this' not found" {
		t.Errorf("GET /nobody-deployed-this = %d %q; want the template's 404 for Worker not found", resp.StatusCode, body)
	}
	runSpecFile(t, name, filepath.Join(src, "..", "playwright-tests", name+".spec.ts"), d.url)
}

// BenchmarkDispatch compares, in one run on the local cluster, a GET of user Workers by
// a plain Go client straight to their Services (direct) with the same GET made through a
// dispatch Worker's get(name).fetch() (dispatched), round robin over
// $DISPATCH_BENCH_USERS user Workers (default 10); it reports p50/p99 and the resident
// memory of the pods. The dispatched call adds the dispatch Worker, its sidecar and one
// mutual-TLS hop.
//
//	go test ./test/e2e -run '^$' -bench Dispatch -benchtime 2000x
func BenchmarkDispatch(b *testing.B) {
	n := 10
	if v, err := strconv.Atoi(os.Getenv("DISPATCH_BENCH_USERS")); err == nil && v > 0 {
		n = v
	}
	var names []string
	for i := range n {
		name := fmt.Sprintf("bench-user-%d", i)
		names = append(names, name)
		newDispatchWorker(b, name, userModule(name), func(s *fleetv1alpha1.WorkerSpec) { s.DispatchNamespace = "bench" })
	}
	newDispatchWorker(b, "bench-platform", dispatcherModule, func(s *fleetv1alpha1.WorkerSpec) {
		s.Bindings = []fleetv1alpha1.Binding{{Name: "dispatcher", DispatchNamespace: &fleetv1alpha1.DispatchNamespaceBinding{Namespace: "bench"}}}
	})
	direct := map[string]string{}
	for _, name := range append(names, "bench-platform") {
		waitWorkerReady(b, name)
		direct[name] = serviceURL(b, name)
	}
	platform := direct["bench-platform"]
	for _, mode := range []string{"direct", "dispatched"} {
		b.Run(mode, func(b *testing.B) {
			benchGets(b, func(i int) (string, string) {
				name := names[i%n]
				if mode == "dispatched" {
					return platform + "/" + name + "/p", name + " saw "
				}
				return direct[name] + "/p", name + " saw "
			})
		})
	}
	b.Logf("pods: %d user Workers, 1 dispatch Worker; resident memory: %s", n, podsRSS(b, append(names, "bench-platform")))
}

// podsRSS sums the resident memory of the containers of the Workers' pods, by
// container ("sidecar 25 MiB, workerd 60 MiB" per pod on average).
func podsRSS(b *testing.B, workers []string) string {
	sum, pods := map[string]int64{}, 0
	for _, w := range workers {
		for _, p := range workerPods(b, w) {
			pods++
			for _, pp := range cluster.PodProcesses(p.Namespace, p.Name) {
				sum[pp.Container] += procRSS(pp.PID)
			}
		}
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(sum)) {
		parts = append(parts, fmt.Sprintf("%s %d MiB in all, %d MiB a pod", c, sum[c]>>20, sum[c]>>20/int64(max(pods, 1))))
	}
	return fmt.Sprintf("%d pods: %s", pods, strings.Join(parts, "; "))
}

// procRSS is the resident set of process pid in bytes (0 when it cannot be read).
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// deleteAndWait deletes Worker w and waits until it and its pods are gone: a Worker of
// the same name may then be created with another spec.dispatchPlacement (which cannot
// change).
func deleteAndWait(t testing.TB, w *fleetv1alpha1.Worker) {
	ctx := context.Background()
	if err := k8sClient.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	eventually(t, time.Minute, "Worker "+w.Name+" gone", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(w), &fleetv1alpha1.Worker{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		if n := len(workerPods(t, w.Name)); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
}

// benchGets GETs the url(i) of b.N calls, each answer starting with its want, and
// reports p50/p99.
func benchGets(b *testing.B, call func(i int) (u, want string)) {
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		u, want := call(i)
		t0 := time.Now()
		got, err := get(u)
		if err != nil || !strings.HasPrefix(got, want) {
			b.Fatalf("%s: got %q, %v; want %q", u, got, err, want)
		}
		durs = append(durs, time.Since(t0))
	}
	b.StopTimer()
	reportPercentiles(b, durs)
}

// reportPercentiles reports the p50 and p99 of durs in µs.
func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	s := slices.Sorted(slices.Values(durs))
	b.ReportMetric(float64(s[len(s)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(s[len(s)*99/100].Microseconds()), "p99-us")
}
