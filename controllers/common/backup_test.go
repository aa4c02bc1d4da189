package common

import (
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/backup"
)

// A store's backup status sums its pods' (docs/backup.md, "Metrics"): databases add
// up, lastShipped is the oldest pod's newest ship (every pod shipped at least then),
// lastFull the newest, the lag the largest.
func TestAddBackup(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	sum := addBackup(nil, backup.Status{Databases: 3, LastShipped: at(10), LastFull: at(2), LagSeconds: 1.5})
	sum = addBackup(sum, backup.Status{Databases: 5, LastShipped: at(4), LastFull: at(8), LagSeconds: 0})
	sum = addBackup(sum, backup.Status{Databases: 1, LastShipped: at(7), LagSeconds: 4.2})
	if sum.Databases != 9 || !sum.LastShipped.Time.Equal(*at(4)) || !sum.LastFull.Time.Equal(*at(8)) || sum.LagSeconds != 4 {
		t.Errorf("sum %+v: want 9 databases, lastShipped +4s, lastFull +8s, lag 4", sum)
	}
}
