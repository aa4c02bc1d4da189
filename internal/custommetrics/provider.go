// Package custommetrics serves the Kubernetes custom metrics API
// (custom.metrics.k8s.io/v1beta2, sigs.k8s.io/custom-metrics-apiserver) from the
// manager, so that a HorizontalPodAutoscaler can scale a Worker on the requests its
// pods have in flight (docs/scaling.md "Autoscaling a Worker").
//
// The value is computed from the series every Worker pod's sidecar already exports:
// the sum of the invocations' wall time (telemetry.WallTimeSeconds) grows by the
// number of requests in flight each second, so its rate over a window is the average
// number in flight during it (Little's law) — no extra event on the request path.
package custommetrics

import (
	"context"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// RequestsInFlight is the metric's name in the custom metrics API: the average number
// of requests a Worker pod was serving over the last Window.
const RequestsInFlight = "requests_in_flight"

// Window bounds the span a value averages over; MinSpan is the least span that gives
// one (a pod's first query only takes its first sample); Rescrape is how old a sample
// may be before a query takes a new one. The HPA controller asks every 15 s.
const (
	Window   = 60 * time.Second
	MinSpan  = 5 * time.Second
	Rescrape = 5 * time.Second
)

// MaxConcurrentScrapes bounds the pods one query reads at once.
const MaxConcurrentScrapes = 16

// ScrapeFunc reads the sum of the wall time of the pod's invocations so far, in seconds.
type ScrapeFunc func(ctx context.Context, pod *corev1.Pod) (float64, error)

// Provider answers the custom metrics API from samples of the Worker pods' sidecars.
type Provider struct {
	// Pods lists the Worker pods (the manager's cache).
	Pods client.Reader
	// Scrape reads one pod.
	Scrape ScrapeFunc
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	scrapes singleflight.Group
	mu      sync.Mutex
	samples map[types.UID][]sample
}

type sample struct {
	at   time.Time
	wall float64
}

var podsResource = schema.GroupResource{Resource: "pods"}

var _ provider.CustomMetricsProvider = (*Provider)(nil)

// ListAllMetrics lists the one metric, on pods.
func (p *Provider) ListAllMetrics() []provider.CustomMetricInfo {
	return []provider.CustomMetricInfo{{GroupResource: podsResource, Namespaced: true, Metric: RequestsInFlight}}
}

// GetMetricByName is the metric of one Worker pod.
func (p *Provider) GetMetricByName(ctx context.Context, name types.NamespacedName, info provider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	if err := check(info); err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := p.Pods.Get(ctx, name, pod); err != nil {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	if !isWorkerPod(pod) {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	v, ok := p.value(ctx, pod)
	if !ok {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	return &v, nil
}

// GetMetricBySelector is the metric of every serving Worker pod the selector matches;
// a pod without a value yet (its first sample, or its sidecar not answering) is left
// out, which the HPA controller treats as it documents for missing metrics.
func (p *Provider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	if err := check(info); err != nil {
		return nil, err
	}
	if metricSelector != nil && !metricSelector.Empty() {
		return nil, apierrors.NewBadRequest(RequestsInFlight + " has no labels to select by (metric.selector must be empty)")
	}
	pods := &corev1.PodList{}
	if err := p.Pods.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		out  = &custom_metrics.MetricValueList{}
		wg   sync.WaitGroup
		sema = make(chan struct{}, MaxConcurrentScrapes)
	)
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !isWorkerPod(pod) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sema <- struct{}{}
			defer func() { <-sema }()
			if v, ok := p.value(ctx, pod); ok {
				mu.Lock()
				out.Items = append(out.Items, v)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].DescribedObject.Name < out.Items[j].DescribedObject.Name })
	p.forget()
	return out, nil
}

// check: the one metric, of pods in one namespace (never a cluster-wide fan-out).
func check(info provider.CustomMetricInfo) error {
	if info.GroupResource != podsResource || info.Metric != RequestsInFlight || !info.Namespaced {
		return provider.NewMetricNotFoundError(info.GroupResource, info.Metric)
	}
	return nil
}

// isWorkerPod: a running pod of a Worker (not a shard, store or engine), not being
// removed, with an address to scrape.
func isWorkerPod(pod *corev1.Pod) bool {
	return pod.Labels[podcontract.LabelComponent] == podcontract.ComponentWorker &&
		pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil && pod.Status.PodIP != ""
}

// value samples the pod when its newest sample is older than Rescrape and averages
// over the span of its samples within Window.
func (p *Provider) value(ctx context.Context, pod *corev1.Pod) (custom_metrics.MetricValue, bool) {
	// One scrape of a pod at a time (two HPAs, or a query by name beside one by
	// selector): samples are added in the order they were taken.
	_, err, _ := p.scrapes.Do(string(pod.UID), func() (any, error) {
		if last, ok := p.newest(pod.UID); ok && p.now().Sub(last.at) < Rescrape {
			return nil, nil
		}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		wall, err := p.Scrape(sctx, pod)
		if err == nil {
			p.add(pod.UID, sample{at: p.now(), wall: wall})
		}
		return nil, err
	})
	if err != nil {
		// Not an old value of a sidecar that stopped answering: none.
		log.FromContext(ctx).V(1).Info("custom metrics: sidecar not read", "pod", pod.Namespace+"/"+pod.Name, "error", err.Error())
		return custom_metrics.MetricValue{}, false
	}
	first, last, ok := p.span(pod.UID, p.now())
	if !ok {
		return custom_metrics.MetricValue{}, false
	}
	span := last.at.Sub(first.at)
	inFlight := (last.wall - first.wall) / span.Seconds()
	window := int64(span.Round(time.Second) / time.Second)
	return custom_metrics.MetricValue{
		DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Metric:          custom_metrics.MetricIdentifier{Name: RequestsInFlight},
		Timestamp:       metav1.NewTime(last.at),
		WindowSeconds:   &window,
		Value:           *resource.NewMilliQuantity(int64(inFlight*1000+0.5), resource.DecimalSI),
	}, true
}

func (p *Provider) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Provider) newest(uid types.UID) (sample, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.samples[uid]
	if len(s) == 0 {
		return sample{}, false
	}
	return s[len(s)-1], true
}

// add keeps s and the samples within Window of it; a sum lower than the last one (the
// sidecar restarted) starts the pod's samples again.
func (p *Provider) add(uid types.UID, s sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.samples == nil {
		p.samples = map[types.UID][]sample{}
	}
	old := p.samples[uid]
	if n := len(old); n > 0 && s.wall < old[n-1].wall {
		old = nil
	}
	kept := old[:0:0]
	for _, o := range old {
		if s.at.Sub(o.at) <= Window {
			kept = append(kept, o)
		}
	}
	p.samples[uid] = append(kept, s)
}

// span is the oldest and newest samples of the pod within Window of now, when they are
// at least MinSpan apart.
func (p *Provider) span(uid types.UID, now time.Time) (first, last sample, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var in []sample
	for _, s := range p.samples[uid] {
		if now.Sub(s.at) <= Window {
			in = append(in, s)
		}
	}
	if len(in) < 2 || in[len(in)-1].at.Sub(in[0].at) < MinSpan {
		return sample{}, sample{}, false
	}
	return in[0], in[len(in)-1], true
}

// forget drops the samples of pods not asked about for twice the Window (pods gone,
// HPAs deleted): they have no use left.
func (p *Provider) forget() {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid, s := range p.samples {
		if len(s) == 0 || now.Sub(s[len(s)-1].at) > 2*Window {
			delete(p.samples, uid)
		}
	}
}
