package telemetry

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Series names, the one list docs/observability.md and the chart's dashboard refer to
// (the dashboard test checks its queries against Names).
const (
	Prefix             = "workerd_operator_worker_"
	InvocationsTotal   = Prefix + "invocations_total"
	WallTimeSeconds    = Prefix + "wall_time_seconds"
	CPUTimeSeconds     = Prefix + "cpu_time_seconds"
	SubrequestsTotal   = Prefix + "subrequests_total"
	ExceptionsTotal    = Prefix + "exceptions_total"
	LogsTotal          = Prefix + "logs_total"
	TruncatedTotal     = Prefix + "tail_truncated_total"
	LabelOverflowTotal = Prefix + "label_overflow_total"
)

// Names lists the series this package registers (histograms by their base name).
func Names() []string {
	return []string{InvocationsTotal, WallTimeSeconds, CPUTimeSeconds, SubrequestsTotal, ExceptionsTotal, LogsTotal, TruncatedTotal, LabelOverflowTotal}
}

// Other replaces a label value once a label has MaxLabelValues distinct values in this
// sidecar, so user-chosen names (RPC methods, exception names, entrypoints) cannot grow
// the series without bound.
const Other = "_other"

// DefaultMaxLabelValues bounds the distinct values of each user-chosen label.
const DefaultMaxLabelValues = 64

// Buckets of the time histograms, in seconds: 1 ms to 5 minutes (Cloudflare's CPU limit
// ceiling, https://developers.cloudflare.com/workers/platform/limits/#cpu-time).
var timeBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics are the per-invocation series.
type Metrics struct {
	invocations *prometheus.CounterVec
	wall, cpu   *prometheus.HistogramVec
	subrequests *prometheus.CounterVec
	exceptions  *prometheus.CounterVec
	logs        *prometheus.CounterVec
	truncated   *prometheus.CounterVec
	overflow    *prometheus.CounterVec
	limits      *labelLimits
}

// NewMetrics makes the series and registers them with reg (when non-nil); max bounds
// the distinct values of each user-chosen label (DefaultMaxLabelValues when ≤ 0).
func NewMetrics(reg prometheus.Registerer, max int) *Metrics {
	if max <= 0 {
		max = DefaultMaxLabelValues
	}
	inv := []string{"worker", "entrypoint", "handler", "method"}
	m := &Metrics{
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: InvocationsTotal,
			Help: "Invocations of the Worker's code by entrypoint, handler, RPC method, execution model (stateless, durableObject), outcome, HTTP status class and Worker version (docs/versions.md)."},
			append(inv, "execution_model", "outcome", "status_class", "version")),
		wall: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: WallTimeSeconds, Buckets: timeBuckets,
			Help: "Wall time of an invocation: from its onset to its outcome on workerd's clock."}, inv),
		cpu: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: CPUTimeSeconds, Buckets: timeBuckets,
			Help: "CPU time of an invocation as workerd reports it in the outcome event; invocations it reports no CPU time for are not observed."}, inv),
		subrequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: SubrequestsTotal,
			Help: "Subrequests and binding calls an invocation made, by the kind of span workerd opened (fetch, durable_object_subrequest, jsRpcSession, ...)."},
			[]string{"worker", "entrypoint", "handler", "kind"}),
		exceptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ExceptionsTotal,
			Help: "Uncaught exceptions reported by invocations, by the exception's name (TypeError, Error, ...)."},
			[]string{"worker", "entrypoint", "handler", "name"}),
		logs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: LogsTotal,
			Help: "console.* calls of invocations by level (debug, info, log, warn, error)."}, []string{"worker", "level"}),
		truncated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: TruncatedTotal,
			Help: "Log lines and spans the tail worker left out of a record over its per-invocation bounds."}, []string{"worker"}),
		overflow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: LabelOverflowTotal,
			Help: "Events whose label value was replaced by " + Other + " because the label reached its distinct-value bound."}, []string{"label"}),
	}
	m.limits = &labelLimits{max: max, seen: map[string]map[string]bool{}, overflow: m.overflow}
	if reg != nil {
		reg.MustRegister(m.invocations, m.wall, m.cpu, m.subrequests, m.exceptions, m.logs, m.truncated, m.overflow)
	}
	return m
}

// observe records one invocation.
func (m *Metrics) observe(r *Record) {
	b := m.limits
	w := b.value("worker", "", r.Worker)
	ep := b.value("entrypoint", w, r.Entrypoint)
	h := b.value("handler", w, r.Trigger)
	method := b.value("method", w+"\x00"+ep, r.Method)
	if !r.Partial {
		m.observeInvocation(r, w, ep, h, method)
	}
	for _, e := range r.Exceptions {
		m.exceptions.WithLabelValues(w, ep, h, b.value("name", w, e.Name)).Inc()
	}
	for _, l := range r.Logs {
		m.logs.WithLabelValues(w, b.value("level", w, l.Level)).Inc()
	}
	if r.Dropped > 0 {
		m.truncated.WithLabelValues(w).Add(float64(r.Dropped))
	}
}

// observeInvocation counts a finished invocation: its outcome, times and subrequests.
func (m *Metrics) observeInvocation(r *Record, w, ep, h, method string) {
	b := m.limits
	outcome := b.value("outcome", w, r.Outcome)
	model := b.value("execution_model", w, r.ExecutionModel)
	m.invocations.WithLabelValues(w, ep, h, method, model, outcome, statusClass(r.Status), b.value("version", w, r.Version)).Inc()
	m.wall.WithLabelValues(w, ep, h, method).Observe(r.WallMs / 1000)
	if r.CPUMs > 0 {
		// workerd reports 0 when it did not measure (docs/observability.md): no sample
		// rather than a false zero.
		m.cpu.WithLabelValues(w, ep, h, method).Observe(r.CPUMs / 1000)
	}
	for kind, n := range r.Subrequests {
		m.subrequests.WithLabelValues(w, ep, h, b.value("kind", w, kind)).Add(float64(n))
	}
}

// statusClass is "2xx".."5xx" of an HTTP status, "none" without a response (a
// non-fetch handler, or a fetch that threw).
func statusClass(s int) string {
	if s < 100 || s > 599 {
		return "none"
	}
	return strconv.Itoa(s/100) + "xx"
}

// labelLimits admits at most max distinct values per label and scope (a Worker, or a
// Worker's entrypoint for methods); later values become Other.
type labelLimits struct {
	mu       sync.Mutex
	max      int
	seen     map[string]map[string]bool
	overflow *prometheus.CounterVec
}

func (l *labelLimits) value(label, scope, v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := label + "\x00" + scope
	set := l.seen[key]
	if set == nil {
		set = map[string]bool{}
		l.seen[key] = set
	}
	if set[v] {
		return v
	}
	if len(set) >= l.max {
		l.overflow.WithLabelValues(label).Inc()
		return Other
	}
	set[v] = true
	return v
}
