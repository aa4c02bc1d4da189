package custommetrics

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
)

// The sidecar's own exposition: the wall time of its invocations, summed over every
// series of the histogram (two handlers here), in seconds.
func TestWallSecondsFromTheSidecar(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := telemetry.Handler(telemetry.Options{Metrics: telemetry.NewMetrics(reg, 0)})
	body := `[{"worker":"w","entrypoint":"default","trigger":"fetch","outcome":"ok","status":200,"wallMs":1500},
	  {"worker":"w","entrypoint":"default","trigger":"scheduled","outcome":"ok","wallMs":250},
	  {"worker":"w","entrypoint":"default","trigger":"fetch","outcome":"ok","status":200,"wallMs":250}]`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("tail POST: %d %s", rec.Code, rec.Body)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	got, err := scrapeURL(context.Background(), srv.Client(), srv.URL)
	if err != nil || got != 2.0 {
		t.Fatalf("wall seconds = %v, %v; want 2", got, err)
	}
	if got, err := WallSeconds(strings.NewReader("# nothing yet\n")); err != nil || got != 0 {
		t.Errorf("before any invocation: %v, %v; want 0", got, err)
	}
}

func workerPod(name string, uid types.UID, component string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid,
			Labels: map[string]string{podcontract.LabelComponent: component, podcontract.LabelWorker: "w"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
}

// fixture is a provider over pods whose wall-time sums the test sets, on a clock the
// test moves.
type fixture struct {
	p     *Provider
	now   time.Time
	walls map[string]float64
}

func newFixture(t *testing.T, pods ...*corev1.Pod) *fixture {
	f := &fixture{now: time.Unix(1000, 0), walls: map[string]float64{}}
	b := fake.NewClientBuilder()
	for _, p := range pods {
		b = b.WithObjects(p)
	}
	f.p = &Provider{Pods: b.Build(), Now: func() time.Time { return f.now },
		Scrape: func(_ context.Context, pod *corev1.Pod) (float64, error) {
			w, ok := f.walls[pod.Name]
			if !ok {
				return 0, errors.New("sidecar not answering")
			}
			return w, nil
		}}
	return f
}

var inFlight = provider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: RequestsInFlight}

func (f *fixture) query(t *testing.T) map[string]int64 {
	t.Helper()
	l, err := f.p.GetMetricBySelector(context.Background(), "ns", labels.SelectorFromSet(labels.Set{podcontract.LabelWorker: "w"}), inFlight, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, v := range l.Items {
		out[v.DescribedObject.Name] = v.Value.MilliValue()
		if v.DescribedObject.Kind != "Pod" || v.Metric.Name != RequestsInFlight {
			t.Errorf("value %+v", v)
		}
	}
	return out
}

func TestRequestsInFlight(t *testing.T) {
	gone := workerPod("gone", "u-gone", podcontract.ComponentWorker)
	gone.DeletionTimestamp, gone.Finalizers = &metav1.Time{Time: time.Unix(1, 0)}, []string{"x"}
	f := newFixture(t, workerPod("a", "u-a", podcontract.ComponentWorker), workerPod("b", "u-b", podcontract.ComponentWorker),
		workerPod("shard", "u-s", podcontract.ComponentDOShard), gone)
	f.walls = map[string]float64{"a": 100, "b": 7, "shard": 0, "gone": 0}
	if got := f.query(t); len(got) != 0 {
		t.Fatalf("first query (one sample each) = %v, want no values", got)
	}
	// 10 s later: a served 30 s of requests (3 in flight on average), b 5 s (0.5).
	f.now = f.now.Add(10 * time.Second)
	f.walls["a"], f.walls["b"] = 130, 12
	if got, want := f.query(t), map[string]int64{"a": 3000, "b": 500}; !maps.Equal(got, want) {
		t.Fatalf("after 10 s = %v (milli), want %v", got, want)
	}
	// A query within Rescrape reads no sidecar and answers the same span.
	f.now = f.now.Add(2 * time.Second)
	f.walls["a"] = 1e6
	if got := f.query(t); got["a"] != 3000 {
		t.Fatalf("within %s: a = %d, want the same 3000", Rescrape, got["a"])
	}
	// The sidecar restarted (its sum fell): no value until a new span.
	f.now = f.now.Add(10 * time.Second)
	f.walls["a"] = 4
	if got := f.query(t); got["a"] != 0 || len(got) != 1 {
		t.Fatalf("after a restart = %v, want only b", got)
	}
	f.now = f.now.Add(15 * time.Second)
	f.walls["a"] = 10
	if got := f.query(t); got["a"] != 400 {
		t.Fatalf("15 s after the restart a = %d, want 400 (6 s over 15 s)", got["a"])
	}
	// A sidecar not answering: the pod is left out (not its old value), the others answer.
	delete(f.walls, "b")
	f.now = f.now.Add(10 * time.Second)
	f.walls["a"] = 20
	if got, want := f.query(t), map[string]int64{"a": 640}; !maps.Equal(got, want) {
		t.Fatalf("b not answering = %v, want %v (a: 16 s of wall time over its 25 s since the restart)", got, want)
	}
	// Samples older than the window give nothing.
	f.now = f.now.Add(2 * Window)
	delete(f.walls, "a")
	if got := f.query(t); len(got) != 0 {
		t.Fatalf("samples older than the window = %v, want none", got)
	}
}

// A pod streaming a /metrics without end is cut off at MaxExpositionBytes.
func TestExpositionBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		line := []byte("# " + strings.Repeat("x", 1<<10) + "\n")
		for n := 0; n <= MaxExpositionBytes; n += len(line) {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	if _, err := scrapeURL(context.Background(), srv.Client(), srv.URL); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("an endless exposition: %v, want refused past %d bytes", err, MaxExpositionBytes)
	}
}

func TestOneMetricOnPods(t *testing.T) {
	f := newFixture(t, workerPod("a", "u-a", podcontract.ComponentWorker))
	other := inFlight
	other.Metric = "requests_per_second"
	if _, err := f.p.GetMetricBySelector(context.Background(), "ns", labels.Everything(), other, labels.Everything()); !apierrors.IsNotFound(err) {
		t.Errorf("another metric: %v, want NotFound", err)
	}
	onService := inFlight
	onService.GroupResource = schema.GroupResource{Resource: "services"}
	if _, err := f.p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, onService, labels.Everything()); !apierrors.IsNotFound(err) {
		t.Errorf("on services: %v, want NotFound", err)
	}
	// The root-scoped route (every namespace at once) is not served.
	clusterWide := inFlight
	clusterWide.Namespaced = false
	if _, err := f.p.GetMetricBySelector(context.Background(), "", labels.Everything(), clusterWide, labels.Everything()); !apierrors.IsNotFound(err) {
		t.Errorf("all namespaces: %v, want NotFound", err)
	}
	if _, err := f.p.GetMetricBySelector(context.Background(), "ns", labels.Everything(), inFlight, labels.SelectorFromSet(labels.Set{"a": "b"})); !apierrors.IsBadRequest(err) {
		t.Errorf("a metric selector: %v, want BadRequest", err)
	}
	if got := f.p.ListAllMetrics(); len(got) != 1 || got[0] != inFlight {
		t.Errorf("ListAllMetrics = %v", got)
	}
}
