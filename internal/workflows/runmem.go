package workflows

import (
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
	"github.com/workerd-operator/workerd-operator/internal/workflows/store"
)

// runShards spreads the instances' run locks: step calls of different instances do not
// wait for each other, and a lock held across a commit (a terminate, a new step
// decided in a read-write transaction) holds up only the few instances of its shard.
const runShards = 256

type runShard struct {
	mu   sync.Mutex
	runs map[string]*runMem // by store.Key(workflow, id)
}

// runMem is what the engine keeps in memory about an instance's current run between
// commits: the step.do calls answered run whose record is not committed yet, the
// attempts answered run and not reported yet, and the re-runs of attempts after
// infrastructure failures. Guarded by its shard's lock (lockRun).
type runMem struct {
	e        *Engine
	pending  map[string]api.StepConfig // stepKey(name, n)
	attempts map[string]int64          // attemptKey(name, n, attempt) -> when it was answered run (ms)
	reruns   map[string]int            // attemptKey -> re-runs after infrastructure failures
}

func stepKey(name string, n int) string { return fmt.Sprintf("%s\x00%d", name, n) }

func attemptKey(name string, n, attempt int) string {
	return fmt.Sprintf("%s\x00%d\x00%d", name, n, attempt)
}

// lockRun locks the instance's run state and returns it with the function that unlocks
// it (an empty state is forgotten then). Lock order: a run lock before mu; a commit
// function takes neither.
func (e *Engine) lockRun(wf, id string) (*runMem, func()) {
	k := string(store.Key(wf, id))
	h := fnv.New32a()
	_, _ = h.Write([]byte(k))
	s := &e.shards[h.Sum32()%runShards]
	s.mu.Lock()
	m := s.runs[k]
	if m == nil {
		m = &runMem{e: e, pending: map[string]api.StepConfig{}, attempts: map[string]int64{}, reruns: map[string]int{}}
		s.runs[k] = m
	}
	return m, func() {
		if len(m.pending) == 0 && len(m.attempts) == 0 && len(m.reruns) == 0 {
			delete(s.runs, k)
		}
		s.mu.Unlock()
	}
}

// startAttempt records that attempt ak was answered run at ms.
func (m *runMem) startAttempt(ak string, ms int64) {
	if _, ok := m.attempts[ak]; !ok {
		m.e.attempting.Add(1)
	}
	m.attempts[ak] = ms
}

// endAttempt forgets attempt ak (reported and committed).
func (m *runMem) endAttempt(ak string) {
	if _, ok := m.attempts[ak]; ok {
		delete(m.attempts, ak)
		m.e.attempting.Add(-1)
	}
	delete(m.reruns, ak)
	m.e.notifySettled()
}

// inFlight reports whether attempts other than except were answered run and not
// reported yet.
func (m *runMem) inFlight(except string) bool {
	for k := range m.attempts {
		if k != except {
			return true
		}
	}
	return false
}

// dropAttempts forgets the run's attempts in flight (its run has ended: the runner
// reports every attempt before it ends a run). Their re-run counts stay: the replay runs
// the same attempts again.
func (m *runMem) dropAttempts() {
	if n := len(m.attempts); n > 0 {
		m.e.attempting.Add(-int64(n))
		clear(m.attempts)
		m.e.notifySettled()
	}
}

// dropPending forgets the run's step.do calls not committed yet (restart, delete, the
// run's end).
func (m *runMem) dropPending() { clear(m.pending) }

// forget drops the instance's steps not committed yet and its re-run counts (restart,
// delete); attempts in flight are forgotten when their run ends.
func (m *runMem) forget() {
	m.dropPending()
	clear(m.reruns)
}
