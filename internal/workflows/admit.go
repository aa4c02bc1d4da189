package workflows

import (
	"sync"
	"sync/atomic"
	"time"
)

// Admission: workerd runs every run of the engine on one thread, so the more runs it has
// at once, the longer each waits for its turn between two steps, while the steps per
// second stay what that thread can do. The runner measures how late it handles each
// message of the engine (Date.now() when the message is handled minus the engine's send
// time, both read from the node's clock: the event-loop lag) and reports it with its
// next message. The engine keeps a limit on the runs in flight: every admitWindow, a
// mean lag under admitLag/2 doubles it, under admitLag raises it by one, and over it
// cuts it by a fifth, down to admitFloor (additive increase, multiplicative decrease,
// as TCP does with its window). Runs that wait for I/O (a fetch in a step) do not delay
// the thread and report no lag: when none came for admitFresh, twice the runs in flight
// may be. Instances held back stay queued. The lag target is low: each run in flight
// beyond what keeps the thread busy only lengthens every run's wait between two steps
// (docs/benchmarks.md "Workflows": 1 ms gave 3.8k steps/s with a p99 step-to-step
// above the built-in engine's; 0.25 ms 3.5k steps/s with a p99 under it).
const (
	admitLag    = 0.25 // ms
	admitFloor  = 4
	admitWindow = 50 * time.Millisecond
	admitFresh  = 250 * time.Millisecond
	admitCut    = 0.8
)

type admission struct {
	mu    sync.Mutex
	limit float64
	// the current window: its start, the sum and count of its lags
	start time.Time
	sum   float64
	n     int
	last  time.Time // when the last lag came, or runs were let in for its absence
	// held: a dispatch stopped at the gate with instances ready (read without mu).
	held atomic.Bool
}

// note counts a lag the runner reported while running runs are in flight and says
// whether a dispatch held at the gate may go on now.
func (a *admission) note(lagMs float64, running int, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = now
	a.sum, a.n = a.sum+lagMs, a.n+1
	if now.Sub(a.start) < admitWindow {
		return false
	}
	limit, mean := max(a.limit, float64(admitFloor)), a.sum/float64(a.n)
	switch {
	case mean > admitLag:
		limit = max(float64(admitFloor), limit*admitCut)
	case float64(running) < limit-1:
		// the limit is not what holds runs back: no evidence to raise it
	case mean < admitLag/2:
		limit *= 2
	default:
		limit++
	}
	a.limit, a.start, a.sum, a.n = limit, now, 0, 0
	return a.held.Load() && float64(running) < limit
}

// take says whether a new run may start while running runs are in flight.
func (a *admission) take(running int, now time.Time) bool {
	if running < admitFloor {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.last) > admitFresh {
		a.last = now
		a.limit = max(a.limit, float64(2*running))
	}
	return float64(running) < a.limit
}

// admit says whether pump may start another run now; when it may not, pump is called
// again when a lag under the limit arrives (runLink), when a run ends, or after
// admitFresh. Called with mu held.
func (e *Engine) admit() bool {
	if e.adm.take(int(e.inFlight.Load()), time.Now()) {
		return true
	}
	e.adm.held.Store(true)
	if e.admitTimer == nil {
		e.admitTimer = time.AfterFunc(admitFresh, e.repump)
	}
	return false
}

// repump lets the dispatches held at the gate go on.
func (e *Engine) repump() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.admitTimer = nil
	e.adm.held.Store(false)
	for name := range e.wfs {
		e.pump(name)
	}
}
