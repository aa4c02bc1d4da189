package containers

import (
	"sync"
	"time"
)

// Bounds of exitLog.
const (
	// exitMemory is how long an exit Wait read is remembered after its pod was deleted:
	// long enough for the sidecar's Stop or Remove that follows it.
	exitMemory = 10 * time.Minute
	// maxExits caps the exits remembered (the oldest goes first).
	maxExits = 4096
)

// exitLog remembers the exit codes Wait read, by instance pod (namespace/name): Wait
// deletes an exited pod once it has read its exit, so that exited pods do not pile up,
// and a later Wait or Stop of that instance on this replica still answers as if the
// pod were there (its exit code; "not running").
type exitLog struct {
	mu    sync.Mutex
	exits map[string]exitRecord
}

type exitRecord struct {
	code int
	at   time.Time
}

func (l *exitLog) record(key string, code int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.exits == nil {
		l.exits = map[string]exitRecord{}
	}
	if len(l.exits) >= maxExits {
		oldest, oldestAt := "", now
		for k, r := range l.exits {
			if now.Sub(r.at) >= exitMemory {
				delete(l.exits, k)
			} else if r.at.Before(oldestAt) {
				oldest, oldestAt = k, r.at
			}
		}
		if len(l.exits) >= maxExits {
			delete(l.exits, oldest)
		}
	}
	l.exits[key] = exitRecord{code: code, at: now}
}

// lookup is the exit recorded for key within exitMemory.
func (l *exitLog) lookup(key string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.exits[key]
	if !ok || now.Sub(r.at) >= exitMemory {
		return 0, false
	}
	return r.code, true
}

// forget drops key's exit: the instance is removed or started again.
func (l *exitLog) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.exits, key)
}

// waitSlots counts the Wait calls in flight per namespace.
type waitSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes a slot of ns unless it has limit in use.
func (w *waitSlots) acquire(ns string, limit int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[ns] >= limit {
		return false
	}
	if w.n == nil {
		w.n = map[string]int{}
	}
	w.n[ns]++
	return true
}

func (w *waitSlots) release(ns string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[ns]--; w.n[ns] <= 0 {
		delete(w.n, ns)
	}
}
