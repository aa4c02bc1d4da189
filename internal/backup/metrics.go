package backup

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors are the replicator's series for the sidecar's /metrics (docs/backup.md):
// how many databases it ships and how far the backup lags behind the newest commit.
func (r *Replicator) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "workerd_operator_backup_databases",
			Help: "Database files of the store this pod ships to its backup.",
		}, func() float64 { return float64(len(r.Positions())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "workerd_operator_backup_shipped_bytes_total",
			Help: "Bytes of backup files uploaded (compressed pages).",
		}, func() float64 { return float64(r.shippedBytes.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "workerd_operator_backup_volume_lost",
			Help: "1 when the store's directory was wiped under the running pod: shipping stopped; restart the pod to restore it.",
		}, func() float64 {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.lost {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "workerd_operator_backup_lag_seconds",
			Help: "Age of the oldest shipping position among files holding a commit not yet shipped (0 when all are shipped).",
		}, func() float64 { return r.Lag(time.Now()).Seconds() }),
	}
}

// Lag is how long the oldest unshipped commit may have waited, at now: the time since
// the last successful sync of the most behind file with a pending commit.
func (r *Replicator) Lag(now time.Time) time.Duration {
	var lag time.Duration
	for _, p := range r.Positions() {
		if !p.Pending {
			continue
		}
		since := now.Sub(p.Shipped)
		if p.Shipped.IsZero() {
			since = now.Sub(r.started)
		}
		if since > lag {
			lag = since
		}
	}
	return lag
}

// StatusPath is the sidecar's endpoint of the backup's Status (JSON), on both
// listeners; across pods it needs a client certificate of the namespace or the manager.
const StatusPath = StatusPrefix + "status"

// StatusPrefix is the sidecar's path prefix of the backup's endpoints.
const StatusPrefix = "/backup/v1/"

// Status is where a pod's backup stands (GET StatusPath).
type Status struct {
	// Databases is how many database files the pod ships.
	Databases int `json:"databases"`
	// LastShipped is the newest upload or check that found nothing to ship; LastFull
	// the newest full copy of any file.
	LastShipped *time.Time `json:"lastShipped,omitempty"`
	LastFull    *time.Time `json:"lastFull,omitempty"`
	// LagSeconds is Lag at the time of the answer.
	LagSeconds float64 `json:"lagSeconds"`
	// VolumeLost: the store's directory was wiped under the pod; shipping stopped.
	VolumeLost bool `json:"volumeLost,omitempty"`
	// Shipped: a pass completed since the pod started, so the bucket holds every
	// database the pod has (up to Lag). Restored: not yet, but the volume was filled
	// from this target when the pod started, so the bucket holds all but what was
	// written since. A pod's volume is moved off a drained node only when it is
	// Shipped, off a lost one when either (docs/scaling.md).
	Shipped  bool `json:"shipped,omitempty"`
	Restored bool `json:"restored,omitempty"`
	// Target is where the pod ships (Target.Identity): a pod shipping elsewhere says
	// nothing of the store's current backup.
	Target string `json:"target,omitempty"`
}

// Status reports the replicator's Status now.
func (r *Replicator) Status() Status {
	now := time.Now()
	st := Status{LagSeconds: r.Lag(now).Seconds()}
	for _, p := range r.Positions() {
		st.Databases++
		if t := p.Shipped; !t.IsZero() && (st.LastShipped == nil || t.After(*st.LastShipped)) {
			st.LastShipped = &t
		}
		if t := p.Full; !t.IsZero() && (st.LastFull == nil || t.After(*st.LastFull)) {
			st.LastFull = &t
		}
	}
	r.mu.Lock()
	st.VolumeLost, st.Shipped, st.Restored = r.lost, r.caughtUp, r.mirrored && !r.caughtUp
	st.Target = r.opts.Target.Identity()
	r.mu.Unlock()
	return st
}

// ServeHTTP answers GET StatusPath with Status.
func (r *Replicator) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != StatusPath || req.Method != http.MethodGet {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(r.Status())
}
