package channels

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the channel registry's Prometheus series (all prefixed
// workerd_operator_channels_). A nil *Metrics records nothing.
type Metrics struct {
	Objects      prometheus.Gauge   // object instances holding a registry
	Channels     prometheus.Gauge   // open channels, all objects
	Subscribers  prometheus.Gauge   // live subscribers, all objects
	BacklogBytes prometheus.Gauge   // bytes queued for subscribers, all objects
	Disconnects  prometheus.Counter // subscribers disconnected over the backlog limit
	Collected    prometheus.Counter // subscriptions collected after their lease lapsed
	Published    prometheus.Counter // publish calls
	Delivered    prometheus.Counter // messages handed to a wait
	Enqueued     prometheus.Counter // message copies queued (sum of publish results)
	Waits        prometheus.Gauge   // waits in progress
}

// NewMetrics makes the series and registers them with reg (when non-nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const p = "workerd_operator_channels_"
	m := &Metrics{
		Objects:      prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "objects", Help: "Durable Object instances holding channel state (a registry) in this sidecar."}),
		Channels:     prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "open", Help: "Open durable channels (all object instances)."}),
		Subscribers:  prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "subscribers", Help: "Live subscriptions (all channels)."}),
		BacklogBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "backlog_bytes", Help: "Bytes of messages queued for subscribers and not yet read."}),
		Disconnects:  prometheus.NewCounter(prometheus.CounterOpts{Name: p + "disconnects_total", Help: "Subscribers disconnected because their backlog exceeded the limit."}),
		Collected:    prometheus.NewCounter(prometheus.CounterOpts{Name: p + "leases_expired_total", Help: "Subscriptions collected because no wait renewed their lease."}),
		Published:    prometheus.NewCounter(prometheus.CounterOpts{Name: p + "messages_published_total", Help: "Publish calls accepted."}),
		Delivered:    prometheus.NewCounter(prometheus.CounterOpts{Name: p + "messages_delivered_total", Help: "Messages returned by wait."}),
		Enqueued:     prometheus.NewCounter(prometheus.CounterOpts{Name: p + "messages_enqueued_total", Help: "Message copies queued for subscribers (sum of publish results)."}),
		Waits:        prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "waits_pending", Help: "Waits in progress (long-polls)."}),
	}
	if reg != nil {
		reg.MustRegister(m.Objects, m.Channels, m.Subscribers, m.BacklogBytes, m.Disconnects, m.Collected, m.Published, m.Delivered, m.Enqueued, m.Waits)
	}
	return m
}

func (m *Metrics) objects(d int) {
	if m != nil {
		m.Objects.Add(float64(d))
	}
}
func (m *Metrics) channels(d int) {
	if m != nil {
		m.Channels.Add(float64(d))
	}
}
func (m *Metrics) subscribers(d int) {
	if m != nil {
		m.Subscribers.Add(float64(d))
	}
}
func (m *Metrics) backlog(d int) {
	if m != nil && d != 0 {
		m.BacklogBytes.Add(float64(d))
	}
}
func (m *Metrics) disconnect() {
	if m != nil {
		m.Disconnects.Inc()
	}
}
func (m *Metrics) collected() {
	if m != nil {
		m.Collected.Inc()
	}
}
func (m *Metrics) published(reached int) {
	if m != nil {
		m.Published.Inc()
		m.Enqueued.Add(float64(reached))
	}
}
func (m *Metrics) delivered() {
	if m != nil {
		m.Delivered.Inc()
	}
}
func (m *Metrics) waiting(d int) {
	if m != nil {
		m.Waits.Add(float64(d))
	}
}
