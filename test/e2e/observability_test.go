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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// obsModule answers by path: 200, 500 or a thrown TypeError; scheduled() logs.
const obsModule = `export default {
  async fetch(req) {
    const p = new URL(req.url).pathname;
    if (p === "/500") return new Response("no", { status: 500 });
    if (p === "/throw") throw new TypeError("thrown on purpose");
    return new Response("ok");
  },
  async scheduled(ev) { console.log("cron", ev.cron); },
};`

// TestWorkerMetrics: through a Worker's pod on the local cluster, a known mix of
// requests and one scheduled run (the manager's path, the trigger socket) appear with
// exactly those counts on the pod's sidecar /metrics, scraped over the pod IP with the
// namespace's certificate as the chart's PodMonitor does (docs/observability.md).
func TestWorkerMetrics(t *testing.T) {
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "obs-mix"},
		Spec: fleetv1alpha1.WorkerSpec{CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](1),
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(obsModule)}}}}},
	}
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	waitWorkerReady(t, w.Name)
	pods := workerPods(t, w.Name)
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	pod := &pods[0]
	base := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(podcontract.DefaultHTTPPort))
	mix := map[string]testenv.Expect{"/": {N: 4, Status: 200}, "/500": {N: 2, Status: 500}, "/throw": {N: 3, Status: 500}}
	testenv.GetAll(t, httpClient, base, mix)
	body := fmt.Sprintf(`{"cron":"0 * * * *","scheduledTime":%d}`, time.Now().UnixMilli())
	if got, refused := call(pod, probe{method: http.MethodPost, path: "/scheduled", port: podcontract.TriggerPort, body: body},
		secretCert(t, managerNS, podcontract.ManagerCASecret)); refused || !strings.HasPrefix(got, "200") {
		t.Fatalf("scheduled: %s", got)
	}
	m := scrapeSidecar(t, pod.Status.PodIP, 10)
	inv := telemetry.InvocationsTotal
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"worker=obs-mix", "entrypoint=default", "handler=fetch", "outcome=ok", "status_class=2xx"}, 4},
		{[]string{"worker=obs-mix", "handler=fetch", "outcome=ok", "status_class=5xx"}, 2},
		{[]string{"worker=obs-mix", "handler=fetch", "outcome=exception", "status_class=none"}, 3},
		{[]string{"worker=obs-mix", "handler=scheduled", "outcome=ok"}, 1},
	} {
		if got := m.Sum(inv, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", inv, c.labels, got, c.want)
		}
	}
	if got := m.Sum(telemetry.ExceptionsTotal, "worker=obs-mix", "name=TypeError"); got != 3 {
		t.Errorf("exceptions TypeError = %v, want 3", got)
	}
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
