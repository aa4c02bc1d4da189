package realnode

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/workerd-operator/workerd-operator/internal/custommetrics"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// slowWorker answers after ?ms= milliseconds of waiting, spending no CPU: requests
// pile up in flight while the CPU stays idle, which only a requests-in-flight target sees.
const slowWorker = `export default {
  async fetch(req) {
    const ms = Number(new URL(req.url).searchParams.get("ms") || "0");
    await new Promise((resolve) => setTimeout(resolve, ms));
    return new Response("waited " + ms + "\n");
  },
};
`

// inFlightClients keep one 1-second request each in flight at all times.
const inFlightClients = 8

// TestHPAOnRequestsInFlight: an HPA on the custom metric requests_in_flight (served by
// the manager, custom.metrics.k8s.io) takes a Worker whose requests wait rather than
// compute from 1 pod to 3 and back to 1, with no failed request while pods are removed;
// the API answers the load's own figure, and nobody unauthorized.
func TestHPAOnRequestsInFlight(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	const name = "slow"
	url := applyWorker(t, name, map[string]any{"source": map[string]any{"inline": map[string]any{
		"modules": []any{map[string]any{"name": "worker.js", "type": "ESModule", "content": slowWorker}},
	}}})
	hpas := cluster.client.AutoscalingV2().HorizontalPodAutoscalers(sampleNS)
	if _, err := hpas.Create(ctx, workerHPA(name, inFlightTarget), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hpas.Delete(context.Background(), name, metav1.DeleteOptions{}) })

	start := time.Now()
	heavy := startLoad(httpClient, url+"/?ms=1000", inFlightClients, 0)
	t.Cleanup(heavy.stop)
	waitReplicas(t, name, func(n int32) bool { return n >= 3 }, "3 ready pods with 8 requests in flight", 5*time.Minute)
	up := time.Since(start)
	time.Sleep(20 * time.Second) // a span of samples on every pod
	checkInFlightFigure(t, name)
	heavy.stop()
	logHPA(t, name)

	start = time.Now()
	fresh := &http.Client{Timeout: httpClient.Timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	light := startLoad(fresh, url+"/?ms=0", 1, 250*time.Millisecond)
	t.Cleanup(light.stop)
	waitReplicas(t, name, func(n int32) bool { return n == 1 }, "1 pod once nothing waits", 5*time.Minute)
	time.Sleep(5 * time.Second)
	light.stop()
	t.Logf("1 → 3 pods in %s with %d requests in flight; 3 → 1 in %s: %d requests, %d failed",
		up.Round(time.Second), inFlightClients, time.Since(start).Round(time.Second), light.ok.Load()+light.failed.Load(), light.failed.Load())
	if n := light.failed.Load(); n > 0 {
		t.Errorf("%d requests failed while the HPA removed pods; first: %s", n, strings.Join(light.failures, "\n  "))
	}
	if n := heavy.failed.Load(); n > 0 {
		t.Errorf("%d requests failed under load; first: %s", n, strings.Join(heavy.failures, "\n  "))
	}
	checkUnauthorizedRefused(t)
}

// inFlightTarget is 2 requests in flight per pod on average: 8 in flight want 4 pods,
// capped at the HPA's 3.
var inFlightTarget = autoscalingv2.MetricSpec{
	Type: autoscalingv2.PodsMetricSourceType,
	Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: custommetrics.RequestsInFlight},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(2, resource.DecimalSI)},
	},
}

// metricValues is the answer of the custom metrics API (custom.metrics.k8s.io/v1beta2
// MetricValueList), the fields the test reads.
type metricValues struct {
	Items []struct {
		DescribedObject struct{ Name string } `json:"describedObject"`
		Value           resource.Quantity     `json:"value"`
		WindowSeconds   int64                 `json:"windowSeconds"`
	} `json:"items"`
}

func inFlightPath() string {
	return "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + sampleNS + "/pods/*/" + custommetrics.RequestsInFlight
}

// checkInFlightFigure: the pods' values match the load's own figure. A value times its
// window is the request-seconds the pod finished in that window. Each client has one
// request in flight at a time, each of 1 s, so over the longest window W (the first
// pod's; the others started later) the pods finished at most inFlightClients × (W + 1 s)
// of them (a request counts when it ends, so one that began before the window counts
// whole), and about inFlightClients × W less the clients' round trips. The values
// themselves do not add up to inFlightClients: the windows differ, and clients whose
// connections moved to a new pod are in the first pod's longer window too.
func checkInFlightFigure(t *testing.T, worker string) {
	t.Helper()
	b, err := cluster.client.Discovery().RESTClient().Get().AbsPath(inFlightPath()).
		Param("labelSelector", podcontract.LabelWorker+"="+worker).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("custom metrics API: %v: %s", err, b)
	}
	var l metricValues
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	var seconds float64
	var longest int64
	for _, it := range l.Items {
		seconds += it.Value.AsApproximateFloat64() * float64(it.WindowSeconds)
		longest = max(longest, it.WindowSeconds)
		t.Logf("%s: %s requests in flight over %d s", it.DescribedObject.Name, it.Value.String(), it.WindowSeconds)
	}
	lo, hi := 0.75*inFlightClients*float64(longest), float64(inFlightClients*(longest+1))
	if len(l.Items) < 3 || seconds < lo || seconds > hi {
		t.Errorf("%d pods, %.0f request-seconds over the longest window of %d s; want 3 pods and %.0f–%.0f (%d clients)",
			len(l.Items), seconds, longest, lo, hi, inFlightClients)
	}
}

// checkUnauthorizedRefused: a ServiceAccount granted nothing cannot read the metrics.
func checkUnauthorizedRefused(t *testing.T) {
	t.Helper()
	cfg := rest.CopyConfig(cluster.rest)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + sampleNS + ":nobody"}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Discovery().RESTClient().Get().AbsPath(inFlightPath()).Do(context.Background()).Error()
	if !apierrors.IsForbidden(err) {
		t.Errorf("a caller granted nothing read the custom metrics API: %v, want Forbidden", err)
	}
}
