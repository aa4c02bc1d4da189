package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// loopModule forwards its own request (fetch(request): on Cloudflare that goes to the
// origin, here back to the Worker's own Service) and answers the inner answer's status
// and body, with X-Hops listing the CF-EW-Via count each invocation saw.
const loopModule = `export default {
  async fetch(request) {
    const seen = request.headers.get("CF-EW-Via");
    const r = await fetch(request);
    const inner = r.headers.get("X-Hops");
    return new Response(r.body, { status: r.status,
      headers: { "X-Hops": inner ? seen + "," + inner : seen } });
  },
};
`

// TestLoopLimit: a Worker calling itself through its own Service gets error 1019 after
// 16 invocations (https://developers.cloudflare.com/workers/observability/errors/#loop-limit),
// and nothing else is harmed: the open file descriptors of its pod's processes and of
// this process (the local cluster's service proxy and node) are back near where they
// were (an unbounded loop holds thousands), admission still answers, another Worker
// still serves.
func TestLoopLimit(t *testing.T) {
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "looper"},
		Spec: fleetv1alpha1.WorkerSpec{CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](1),
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(loopModule)}}}}},
	}
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	waitWorkerReady(t, "looper")
	base := serviceURL(t, "looper")
	host := fmt.Sprintf("looper.%s.svc.cluster.local:%s", sampleNS, base[strings.LastIndex(base, ":")+1:])
	pid := podPIDs(t, "looper")
	// One call first: connections the first request opens and keeps (workerd's, the
	// proxy's) are in the baseline.
	loopOnce(t, base, host)
	before := openFDs(t, pid)
	status, body, hops := loopOnce(t, base, host)
	n := int(limits.Get(limits.DefaultProfile, limits.LoopInvocations))
	var want []string
	for i := n - 1; i >= 0; i-- {
		want = append(want, strconv.Itoa(i))
	}
	if status != render.LoopLimitStatus || body != "error code: 1019" || hops != strings.Join(want, ",") {
		t.Fatalf("got %d %q X-Hops %q, want %d %q X-Hops %q", status, body, hops, render.LoopLimitStatus, "error code: 1019", strings.Join(want, ","))
	}
	after := openFDs(t, pid)
	t.Logf("open file descriptors before %v, after %v", before, after)
	for p, b := range before {
		// A chain of 16 holds about 2 descriptors per hop in each process while it runs;
		// after it they are closed or pooled. The bound is far below an unbounded loop's.
		if a := after[p]; a > b+2*n {
			t.Errorf("process %s: %d open file descriptors after the chain, %d before", p, a, b)
		}
	}
	// Admission still answers: a dry-run create passes the webhooks.
	probe := w.DeepCopy()
	probe.ObjectMeta = metav1.ObjectMeta{Namespace: sampleNS, Name: "looper-probe"}
	if err := k8sClient.Create(context.Background(), probe, client.DryRunAll); err != nil {
		t.Errorf("admission after the loop: %v", err)
	}
	if got, err := get(serviceURL(t, "hello") + "/after-loop"); err != nil || !strings.Contains(got, "/after-loop") {
		t.Errorf("hello after the loop: %q, %v", got, err)
	}
}

// loopOnce GETs the looper through its Service address with its Service name as Host,
// so the Worker's fetch(request) goes to that name: its own Service.
func loopOnce(t *testing.T, base, host string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/loop", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Hops")
}

// podPIDs names the processes whose descriptors count: the pod's containers and this
// process, which runs the local cluster's node and service proxy.
func podPIDs(t *testing.T, worker string) map[string]int {
	t.Helper()
	out := map[string]int{"e2e (node, service proxy)": os.Getpid()}
	pod := workerPods(t, worker)[0]
	for _, p := range cluster.PodProcesses(pod.Namespace, pod.Name) {
		out[p.Container] = p.PID
	}
	if len(out) < 3 {
		t.Fatalf("processes of %s: %v, want workerd and sidecar too", pod.Name, out)
	}
	return out
}

func openFDs(t *testing.T, pids map[string]int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, pid := range pids {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = len(ents)
	}
	return out
}
