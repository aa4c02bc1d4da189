package cronschedule

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the dispatcher, registered on controller-runtime's metrics.Registry (served
// by the manager's /metrics).
var (
	// lateness: actual dispatch start minus the slot's scheduled time, in seconds.
	lateness = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "workerd_operator_cron_dispatch_lateness_seconds",
		Help:    "Dispatch start minus the slot's scheduled time, in seconds.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	})
	// outcomes counts recorded dispatches per CronSchedule and outcome.
	outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workerd_operator_cron_dispatches_total",
		Help: "Dispatched cron slots per CronSchedule and outcome (ok, exception, exceededWallTime, exceededCpu, skipped, unreachable).",
	}, []string{"namespace", "cronschedule", "outcome"})
	// claimConflicts counts slot claims that lost an optimistic-concurrency race.
	claimConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "workerd_operator_cron_claim_conflicts_total",
		Help: "Slot claims whose status write conflicted (another writer, e.g. a second dispatcher).",
	})
	registerOnce sync.Once
)

// Collectors are the dispatcher's series (the chart dashboard's test reads their names).
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{lateness, outcomes, claimConflicts}
}

func registerMetrics() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(Collectors()...)
	})
}

// forgetSeries deletes the outcome series of CronSchedules that are gone: those of
// namespace ns ("" for all) not in listed.
func forgetSeries(ns string, listed map[types.NamespacedName]bool) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		outcomes.Collect(ch)
		close(ch)
	}()
	gone := map[types.NamespacedName]bool{}
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		var k types.NamespacedName
		for _, l := range pb.GetLabel() {
			switch l.GetName() {
			case "namespace":
				k.Namespace = l.GetValue()
			case "cronschedule":
				k.Name = l.GetValue()
			}
		}
		if (ns == "" || k.Namespace == ns) && !listed[k] {
			gone[k] = true
		}
	}
	for k := range gone {
		outcomes.DeletePartialMatch(prometheus.Labels{"namespace": k.Namespace, "cronschedule": k.Name})
	}
}
