package realnode

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// busyWorker spends CPU on every request: ?n= loop rounds (Date.now() stands still
// during a request in workerd, so the work is counted, not timed).
const busyWorker = `export default {
  async fetch(req) {
    const n = Number(new URL(req.url).searchParams.get("n") || "0");
    let x = 0;
    for (let i = 0; i < n; i++) x = (x * 31 + i) | 0;
    return new Response("done " + x + "\n");
  },
};
`

// TestHPAScalesAWorker: a HorizontalPodAutoscaler on a Worker's /scale subresource
// with a CPU target (metrics-server reading the kubelet) takes the Worker from 1 pod
// to 3 under load and back to 1 when the load is light; no request fails while pods
// are removed. https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/
func TestHPAScalesAWorker(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	const name = "busy"
	url := applyWorker(t, name, map[string]any{"source": map[string]any{"inline": map[string]any{
		"modules": []any{map[string]any{"name": "worker.js", "type": "ESModule", "content": busyWorker}},
	}}})
	hpas := cluster.client.AutoscalingV2().HorizontalPodAutoscalers(sampleNS)
	if _, err := hpas.Create(ctx, workerHPA(name, cpuTarget), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hpas.Delete(context.Background(), name, metav1.DeleteOptions{}) })

	start := time.Now()
	heavy := startLoad(httpClient, url+"/?n=10000000", 1, 0)
	t.Cleanup(heavy.stop)
	waitReplicas(t, name, func(n int32) bool { return n >= 3 }, "3 ready pods under load", 5*time.Minute)
	up := time.Since(start)
	heavy.stop()
	logHPA(t, name)

	start = time.Now()
	// A connection per request: every pod gets requests until it leaves the Service,
	// the ones removed included.
	fresh := &http.Client{Timeout: httpClient.Timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	// About 4 requests/s: on the two pods left after the load, 20/s over fresh connections
	// measured 35-37 % of their CPU requests each, enough to hold 2 pods at a 50 % target
	// (ceil(2 × 37 / 50) = 2); a fifth of that leaves one pod's worth with a wide margin.
	light := startLoad(fresh, url+"/?n=1000", 1, 250*time.Millisecond)
	t.Cleanup(light.stop)
	waitReplicas(t, name, func(n int32) bool { return n == 1 }, "1 pod once the load is light", 5*time.Minute)
	time.Sleep(5 * time.Second) // requests to the pods just removed, once they are gone
	light.stop()
	t.Logf("1 → 3 pods in %s under load; 3 → 1 in %s under light load: %d requests, %d failed",
		up.Round(time.Second), time.Since(start).Round(time.Second), light.ok.Load()+light.failed.Load(), light.failed.Load())
	if n := light.failed.Load(); n > 0 {
		t.Errorf("%d requests failed while the HPA removed pods; first: %s", n, strings.Join(light.failures, "\n  "))
	}
}

// cpuTarget is 50 % of the pods' CPU requests.
var cpuTarget = autoscalingv2.MetricSpec{
	Type: autoscalingv2.ResourceMetricSourceType,
	Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
		Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(50)),
	}},
}

// workerHPA scales the Worker name between 1 and 3 pods on metric, down after 30 s of
// lower demand (the default waits 5 minutes).
func workerHPA(name string, metric autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sampleNS},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: fleetGroup + "/v1alpha1", Kind: "Worker", Name: name},
			MinReplicas:    ptr(int32(1)),
			MaxReplicas:    3,
			Metrics:        []autoscalingv2.MetricSpec{metric},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(30))},
			},
		},
	}
}

// waitReplicas waits until the Worker's Deployment has every pod ready and their
// number satisfies want.
func waitReplicas(t *testing.T, name string, want func(int32) bool, what string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d, err := cluster.client.AppsV1().Deployments(sampleNS).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && d.Spec.Replicas != nil {
			st := d.Status
			if want(*d.Spec.Replicas) && st.Replicas == *d.Spec.Replicas && st.ReadyReplicas == st.Replicas {
				return
			}
		}
		if time.Now().After(deadline) {
			logHPA(t, name)
			t.Fatalf("%s: not within %s (deployment: %v)", what, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

func logHPA(t *testing.T, name string) {
	h, err := cluster.client.AutoscalingV2().HorizontalPodAutoscalers(sampleNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Logf("hpa: %v", err)
		return
	}
	var conds []string
	for _, c := range h.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	var cur []string
	for _, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
			cur = append(cur, fmt.Sprintf("cpu %d%%", *m.Resource.Current.AverageUtilization))
		}
		if m.Pods != nil && m.Pods.Current.AverageValue != nil {
			cur = append(cur, fmt.Sprintf("%s %s per pod", m.Pods.Metric.Name, m.Pods.Current.AverageValue))
		}
	}
	t.Logf("hpa: %d → %d replicas, %s; %s", h.Status.CurrentReplicas, h.Status.DesiredReplicas, strings.Join(cur, ", "), strings.Join(conds, "; "))
}
