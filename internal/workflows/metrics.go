package workflows

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Series names of the engine (docs/observability.md; docs/alerts.md reads them to tell
// a busy engine from a stalled one).
const (
	metricPrefix          = "workerd_operator_workflow_"
	StepAttemptsTotal     = metricPrefix + "step_attempts_total"
	RunsTotal             = metricPrefix + "runs_total"
	RunsInFlight          = metricPrefix + "runs_in_flight"
	RunsReady             = metricPrefix + "runs_ready"
	CommitFailuresTotal   = metricPrefix + "commit_failures_total"
	runOutcomeUnreachable = "unreachable"
)

// engineMetrics are the engine's own counters; the gauges are read from its state when
// scraped. Their workflow label takes the engine's configured workflows only.
type engineMetrics struct {
	attempts *prometheus.CounterVec
	runs     *prometheus.CounterVec
	failures prometheus.Counter
}

func newEngineMetrics() engineMetrics {
	return engineMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: StepAttemptsTotal,
			Help: "step.do attempts whose report the engine committed (success, failure or retry).",
		}, []string{"workflow"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RunsTotal,
			Help: "Runs of an instance's code that ended, by outcome: complete, errored, suspended (sleep, wait, retry delay, pause), aborted, unreachable (workerd did not answer).",
		}, []string{"workflow", "outcome"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: CommitFailuresTotal,
			Help: "Commits of the engine's store that failed (full or failing disk); the engine retries them.",
		}),
	}
}

var (
	inFlightDesc = prometheus.NewDesc(RunsInFlight, "Instances whose code is running now (each holds one of the workflow's concurrency slots).", []string{"workflow"}, nil)
	readyDesc    = prometheus.NewDesc(RunsReady, "Instances ready to run and waiting for a concurrency slot (queued, woken or resumed).", []string{"workflow"}, nil)
)

// Collectors are the engine's series for the sidecar's /metrics.
func (e *Engine) Collectors() []prometheus.Collector {
	return []prometheus.Collector{e.metrics.attempts, e.metrics.runs, e.metrics.failures, engineGauges{e}}
}

// engineGauges reads the runs in flight and ready from the engine's state.
type engineGauges struct{ e *Engine }

func (g engineGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightDesc
	ch <- readyDesc
}

func (g engineGauges) Collect(ch chan<- prometheus.Metric) {
	type counts struct{ inflight, ready int }
	g.e.mu.Lock()
	by := make(map[string]counts, len(g.e.wfs))
	for name, w := range g.e.wfs {
		by[name] = counts{len(w.inflight), w.ready.Len()}
	}
	g.e.mu.Unlock()
	for name, c := range by {
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(c.inflight), name)
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, float64(c.ready), name)
	}
}

// runOutcomes are the values of RunsTotal's outcome label.
var runOutcomes = []string{"complete", "errored", "suspended", "aborted", runOutcomeUnreachable}

// initSeries makes every series of workflow wf exist from the engine's start at 0, so
// the first event is an increase (an alert's increase() misses a series' first sample).
func (m engineMetrics) initSeries(wf string) {
	m.attempts.WithLabelValues(wf)
	for _, o := range runOutcomes {
		m.runs.WithLabelValues(wf, o)
	}
}

// countRun counts a run's end once its outcome is committed.
func (e *Engine) countRun(job *runJob, res *runResult, runErr error) {
	outcome := runOutcomeUnreachable
	if runErr == nil && res != nil {
		outcome = res.Outcome
	}
	if !slices.Contains(runOutcomes, outcome) {
		outcome = "other"
	}
	e.metrics.runs.WithLabelValues(job.Workflow, outcome).Inc()
}
