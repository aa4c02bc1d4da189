package workflows

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gorilla/websocket"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
	"github.com/workerd-operator/workerd-operator/internal/workflows/store"
)

// Engine runs workflow instances by replay; see the package comment.
//
// Locks: no lock is held while a commit is on the disk except an instance's run lock
// (lockRun; a terminate, restart or delete, and a step call decided in a read-write
// transaction, so that no attempt starts that such a change would not see). A replayed
// step is answered from a read-only transaction with no lock. mu guards the scheduling
// state (ready queues, slots, timers) and is held only briefly.
type Engine struct {
	o       Options
	db      *bolt.DB
	commits *committer
	dialer  *websocket.Dialer
	ctx     context.Context
	cancel  context.CancelFunc
	// wfs is fixed after New; the wfState fields that change are guarded by mu.
	wfs map[string]*wfState

	// shards hold the instances' run state (runmem.go); attempting counts the attempts
	// in flight in all of them.
	shards     [runShards]runShard
	attempting atomic.Int64
	closed     atomic.Bool
	// stopping: a graceful shutdown is waiting for the attempts in flight; nothing new
	// is dispatched or started.
	stopping atomic.Bool
	// settled is closed (and replaced) whenever attempts in flight are forgotten while
	// stopping.
	settleMu sync.Mutex
	settled  chan struct{}
	// commitFault, when set (tests), fails commits after their changes, as a full or
	// failing disk does: the transaction is rolled back.
	commitFault atomic.Pointer[func() error]
	// adm holds new runs back while workerd falls behind (admit.go); inFlight counts the
	// runs in flight in all workflows (their wfState.inflight, changed under mu).
	adm      admission
	inFlight atomic.Int64

	mu     sync.Mutex
	timers map[string]*time.Timer
	// dispatchBackoff: no dispatch before this time (the runner or the store failed);
	// dispatchFailures counts those failures in a row (dispatchDelay).
	dispatchBackoff  time.Time
	dispatchFailures int
	pumpTimer        *time.Timer
	admitTimer       *time.Timer

	metrics engineMetrics
}

type wfState struct {
	cfg         api.WorkflowConfig
	inflight    map[string]bool
	pendingWake map[string]bool
	ready       readyHeap
	inReady     map[string]bool
	maxInflight int
}

type readyItem struct {
	prio int // 0 woken/recovered/resumed, 1 new
	seq  uint64
	id   string
}

type readyHeap []readyItem

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if h[i].prio != h[j].prio {
		return h[i].prio < h[j].prio
	}
	return h[i].seq < h[j].seq
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(readyItem)) }
func (h *readyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// New opens the store under o.DataDir and recovers: running instances are dispatched
// again (replay), waiting ones get their timers back, queued ones keep their order.
func New(o Options) (*Engine, error) {
	o = o.withDefaults()
	db, err := store.Open(o.DataDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		o: o, db: db, ctx: ctx, cancel: cancel,
		dialer:  newRunnerDialer(),
		wfs:     map[string]*wfState{},
		timers:  map[string]*time.Timer{},
		settled: make(chan struct{}),
		metrics: newEngineMetrics(),
	}
	for i := range e.shards {
		e.shards[i].runs = map[string]*runMem{}
	}
	fail := func(err error) (*Engine, error) {
		db.Close()
		cancel()
		return nil, err
	}
	for _, c := range o.Workflows {
		if err := e.checkName("workflow name", c.Name, limits.WorkflowInstanceIDChars); err != nil {
			return fail(fmt.Errorf("workflows: %w", err))
		}
		e.wfs[c.Name] = &wfState{cfg: e.workflowDefaults(c), inflight: map[string]bool{}, pendingWake: map[string]bool{}, inReady: map[string]bool{}}
		e.metrics.initSeries(c.Name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := db.Update(e.recoverTx); err != nil {
		return fail(fmt.Errorf("workflows: recover: %w", err))
	}
	e.commits = newCommitter(db, &e.commitFault)
	for name := range e.wfs {
		e.pump(name)
	}
	go e.sweepLoop()
	return e, nil
}

// workflowDefaults fills c's zero limits from the profile.
func (e *Engine) workflowDefaults(c api.WorkflowConfig) api.WorkflowConfig {
	if c.Steps <= 0 {
		c.Steps = int(e.lim(limits.WorkflowStepsDefault))
	}
	if c.Concurrency <= 0 {
		c.Concurrency = int(e.lim(limits.WorkflowRunningInstances))
	}
	if c.SuccessRetentionMs <= 0 {
		c.SuccessRetentionMs = e.lim(limits.WorkflowRetentionMs)
	}
	if c.ErrorRetentionMs <= 0 {
		c.ErrorRetentionMs = e.lim(limits.WorkflowRetentionMs)
	}
	return c
}

// recoverTx fences the runs of the previous process (running and waitingForPause
// instances get a new run id before anything is served), terminates the instances whose
// terminate was waiting for attempts in flight (those attempts ended with the process),
// and queues every instance that can go on: running ones first, queued ones in order;
// waiting ones get their timers.
func (e *Engine) recoverTx(tx *bolt.Tx) error {
	now := nowMs()
	var fenced []*api.Instance
	err := store.Instances(tx).ForEach(func(_, v []byte) error {
		var in api.Instance
		if err := json.Unmarshal(v, &in); err != nil {
			return err
		}
		if in.TerminateRequested != 0 && !api.Finite(in.Status) {
			terminate(&in, now)
			fenced = append(fenced, &in)
			return nil
		}
		if in.Status == api.StatusRunning || in.Status == api.StatusWaitingForPause {
			in.RunID++
			c := in
			fenced = append(fenced, &c)
		}
		w := e.wfs[in.Workflow]
		if w == nil {
			return nil
		}
		switch in.Status {
		case api.StatusRunning, api.StatusWaitingForPause:
			e.pushReady(w, in.ID, 0, in.Seq)
		case api.StatusQueued:
			e.pushReady(w, in.ID, 1, in.Seq)
		case api.StatusWaiting:
			if in.WakeAt > 0 && in.WakeAt <= now {
				e.pushReady(w, in.ID, 0, in.Seq)
			} else if in.WakeAt > 0 {
				e.armTimer(in.Workflow, in.ID, in.WakeAt)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, in := range fenced {
		if err := store.PutInstance(tx, in); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) sweepLoop() {
	t := time.NewTicker(e.o.RetentionSweep)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
			if n, err := e.SweepRetention(); err != nil {
				e.logf("workflows: retention sweep: %v", err)
			} else if n > 0 {
				e.logf("workflows: retention sweep deleted %d finished instances", n)
			}
		}
	}
}

// SweepRetention deletes finished instances whose retention has passed (complete and
// terminated: SuccessRetentionMs; errored: ErrorRetentionMs) and returns how many.
func (e *Engine) SweepRetention() (int, error) {
	if e.closed.Load() {
		return 0, nil
	}
	now := nowMs()
	n := 0
	err := e.commit(func(tx *bolt.Tx) error {
		n = 0
		var doomed []*api.Instance
		err := store.Instances(tx).ForEach(func(_, v []byte) error {
			var in api.Instance
			if err := json.Unmarshal(v, &in); err != nil {
				return err
			}
			w := e.wfs[in.Workflow]
			if w == nil || !api.Finite(in.Status) || in.Ended == 0 {
				return nil
			}
			keep := w.cfg.SuccessRetentionMs
			if in.Status == api.StatusErrored {
				keep = w.cfg.ErrorRetentionMs
			}
			if in.Ended+keep <= now {
				doomed = append(doomed, &in)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, in := range doomed {
			if err := store.DeleteInstance(tx, in.Workflow, in.ID, true); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// Shutdown stops the engine gracefully: Quiesce, then Close. Runs cut short replay
// when the engine comes back; their committed steps are not run again.
// Store is the engine's bbolt store, for the backup to read (internal/backup).
func (e *Engine) Store() *bolt.DB { return e.db }

func (e *Engine) Shutdown(ctx context.Context) error {
	_ = e.Quiesce(ctx)
	return e.Close()
}

// Quiesce stops dispatching runs and starting steps or attempts, then waits until no
// attempt is in flight (each result is committed as it settles) or ctx ends (its error).
// The runner must still reach the engine meanwhile: it reports attempts over the API.
func (e *Engine) Quiesce(ctx context.Context) error {
	// An attempt is counted before the step call checks stopping (confirmRun), so an
	// attempt either is counted here or is never started.
	e.stopping.Store(true)
	for {
		e.settleMu.Lock()
		ch := e.settled
		e.settleMu.Unlock()
		n := e.attempting.Load()
		if n <= 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			e.logf("workflows: shutdown: %d attempts still in flight: %v", n, ctx.Err())
			return ctx.Err()
		}
	}
}

// notifySettled wakes Quiesce when attempts in flight were forgotten.
func (e *Engine) notifySettled() {
	if !e.stopping.Load() {
		return
	}
	e.settleMu.Lock()
	close(e.settled)
	e.settled = make(chan struct{})
	e.settleMu.Unlock()
}

// Close stops timers and dispatches and closes the store at once (runs in workerd are
// fenced by their run id when the engine comes back); Shutdown first waits for attempts.
func (e *Engine) Close() error {
	e.closed.Store(true)
	e.mu.Lock()
	for _, t := range e.timers {
		t.Stop()
	}
	for _, t := range []*time.Timer{e.pumpTimer, e.admitTimer} {
		if t != nil {
			t.Stop()
		}
	}
	e.mu.Unlock()
	e.cancel()
	e.commits.close()
	return e.db.Close()
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (e *Engine) scaled(ms int64) int64 { return int64(float64(ms) * e.o.TimeScale) }

func (e *Engine) logf(format string, a ...any) {
	if e.o.Logf != nil {
		e.o.Logf(format, a...)
	}
}

func (e *Engine) wf(name string) (*wfState, error) {
	w := e.wfs[name]
	if w == nil {
		return nil, api.Errorf(404, "workflow.not_found", "workflow %q is not served by this engine", name)
	}
	return w, nil
}

// commit commits f in a group commit (committer.commit: f may run more than once).
// Called with no lock held but, at most, a run lock.
func (e *Engine) commit(f func(tx *bolt.Tx) error) error {
	return e.commits.commit(f)
}

func (e *Engine) pushReady(w *wfState, id string, prio int, seq uint64) {
	if w.inReady[id] {
		return
	}
	w.inReady[id] = true
	heap.Push(&w.ready, readyItem{prio: prio, seq: seq, id: id})
}

// wake makes a waiting instance ready (timer fired, event arrived). Called with mu held.
func (e *Engine) wake(wfName, id string) {
	w := e.wfs[wfName]
	if w == nil || e.closed.Load() {
		return
	}
	if w.inflight[id] {
		w.pendingWake[id] = true
		return
	}
	var in *api.Instance
	_ = e.db.View(func(tx *bolt.Tx) error {
		in, _ = store.GetInstance(tx, wfName, id)
		return nil
	})
	if in == nil || (in.Status != api.StatusWaiting && in.Status != api.StatusRunning && in.Status != api.StatusQueued && in.Status != api.StatusWaitingForPause) {
		return
	}
	e.pushReady(w, id, 0, in.Seq)
	e.pump(wfName)
}

func (e *Engine) armTimer(wfName, id string, at int64) {
	k := string(store.Key(wfName, id))
	if t := e.timers[k]; t != nil {
		t.Stop()
	}
	d := time.Duration(at-nowMs()) * time.Millisecond
	e.timers[k] = time.AfterFunc(d, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.timers, k)
		e.wake(wfName, id)
	})
}

func (e *Engine) stopTimer(wfName, id string) {
	k := string(store.Key(wfName, id))
	if t := e.timers[k]; t != nil {
		t.Stop()
		delete(e.timers, k)
	}
}

// syncTimer stops the instance's timer unless it waits for a deadline (after a change
// committed outside mu: a timer armed since then belongs to a later commit). Called
// with mu held.
func (e *Engine) syncTimer(wfName, id string) {
	var in *api.Instance
	_ = e.db.View(func(tx *bolt.Tx) error {
		in, _ = store.GetInstance(tx, wfName, id)
		return nil
	})
	if in == nil || in.Status != api.StatusWaiting || in.WakeAt == 0 {
		e.stopTimer(wfName, id)
	}
}

// pump dispatches ready instances while the workflow has free slots: each takes its
// slot at once and starts (start) on its own goroutine. Called with mu held.
func (e *Engine) pump(wfName string) {
	w := e.wfs[wfName]
	if w == nil || e.closed.Load() || e.stopping.Load() {
		return
	}
	if d := time.Until(e.dispatchBackoff); d > 0 {
		if e.pumpTimer == nil {
			e.pumpTimer = time.AfterFunc(d, func() {
				e.mu.Lock()
				defer e.mu.Unlock()
				e.pumpTimer = nil
				for name := range e.wfs {
					e.pump(name)
				}
			})
		}
		return
	}
	for len(w.inflight) < w.cfg.Concurrency && w.ready.Len() > 0 && e.admit() {
		it := heap.Pop(&w.ready).(readyItem)
		delete(w.inReady, it.id)
		if w.inflight[it.id] {
			w.pendingWake[it.id] = true
			continue
		}
		e.stopTimer(wfName, it.id)
		w.inflight[it.id] = true
		e.inFlight.Add(1)
		if len(w.inflight) > w.maxInflight {
			w.maxInflight = len(w.inflight)
		}
		e.start(wfName, it)
	}
}

// start queues the instance's move to running under a new run id (group commit, in
// the order of the ready queue) and then runs it. Called with mu held.
func (e *Engine) start(wfName string, it readyItem) {
	var job *runJob
	e.commits.commitAsync(func(tx *bolt.Tx) error {
		var err error
		job, err = startRunTx(tx, wfName, it.id)
		return err
	}, func(err error) { go e.started(wfName, it, job, err) })
}

// started runs a started instance's job; an instance that cannot run gives its slot
// back. When the commit failed the instance stays ready and every dispatch waits for
// the store to recover.
func (e *Engine) started(wfName string, it readyItem, job *runJob, err error) {
	if err == nil && job != nil {
		e.dispatch(job)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.wfs[wfName]
	delete(w.inflight, it.id)
	e.inFlight.Add(-1)
	if err != nil {
		if !e.closed.Load() {
			e.logf("workflows: dispatch %s/%s: %v (dispatching again)", wfName, it.id, err)
		}
		delete(w.pendingWake, it.id)
		e.pushReady(w, it.id, it.prio, it.seq)
		e.holdDispatch(true)
	} else if w.pendingWake[it.id] {
		delete(w.pendingWake, it.id)
		e.wakeLocked(w, wfName, it.id)
	}
	e.pump(wfName)
}

// startRunTx moves an instance that can run to running under a new run id and returns
// the run to dispatch (nil: the instance is gone or cannot run).
func startRunTx(tx *bolt.Tx, wfName, id string) (*runJob, error) {
	in, err := store.GetInstance(tx, wfName, id)
	if err != nil {
		return nil, nil
	}
	switch in.Status {
	case api.StatusQueued, api.StatusRunning, api.StatusWaiting:
		in.Status = api.StatusRunning
	case api.StatusWaitingForPause:
	default:
		return nil, nil
	}
	in.RunID++
	in.Dispatches++
	in.WakeAt, in.WaitType = 0, ""
	if in.Started == 0 {
		in.Started = nowMs()
		in.StartOrder = store.NextSeq(tx, "start-seq")
	}
	if err := store.PutInstance(tx, in); err != nil {
		return nil, err
	}
	params := in.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	ts := in.Created
	if in.ScheduledMs != 0 {
		ts = in.ScheduledMs
	}
	return &runJob{Workflow: wfName, ID: in.ID, RunID: in.RunID, Event: runEvent{
		Payload: params, Timestamp: ts, InstanceID: in.ID, WorkflowName: wfName, Schedule: in.Schedule}}, nil
}

type runEvent struct {
	Payload      json.RawMessage `json:"payload"`
	Timestamp    int64           `json:"timestamp"`
	InstanceID   string          `json:"instanceId"`
	WorkflowName string          `json:"workflowName"`
	Schedule     string          `json:"schedule,omitempty"`
}

type runJob struct {
	Workflow string   `json:"workflow"`
	ID       string   `json:"id"`
	RunID    uint64   `json:"runId"`
	Event    runEvent `json:"event"`
	// T is when the job was sent (ms, runlink.go).
	T float64 `json:"t,omitempty"`
}

type runResult struct {
	Outcome string          `json:"outcome"` // complete | errored | suspended | aborted
	Output  json.RawMessage `json:"output,omitempty"`
	Error   *api.ErrorInfo  `json:"error,omitempty"`
}

// dispatch runs job on the runner and commits its outcome.
func (e *Engine) dispatch(job *runJob) {
	res, err := e.callRunner(job)
	if err != nil && !e.closed.Load() {
		e.logf("workflows: run %s/%s #%d: %v (dispatching again)", job.Workflow, job.ID, job.RunID, err)
	}
	e.settleRun(job, res, err)
}

// settleRun commits a run's outcome (group commit) and frees its slot. When the commit
// fails the instance keeps its slot and the same outcome is committed again after
// dispatchDelay: running the user's code again would repeat its side effects while the
// disk is full.
func (e *Engine) settleRun(job *runJob, res *runResult, runErr error) {
	if e.closed.Load() {
		return // the next process replays the run
	}
	retry := false
	uerr := e.commit(func(tx *bolt.Tx) error {
		var ferr error
		retry, ferr = e.finishRunTx(tx, job, res, runErr)
		return ferr
	})
	if uerr != nil {
		if e.closed.Load() {
			return
		}
		e.metrics.failures.Inc()
		e.mu.Lock()
		e.holdDispatch(true)
		d := time.Until(e.dispatchBackoff)
		e.mu.Unlock()
		e.logf("workflows: commit run %s/%s: %v (committing its outcome again in %s)", job.Workflow, job.ID, uerr, d)
		time.AfterFunc(d, func() { e.settleRun(job, res, runErr) })
		return
	}
	e.countRun(job, res, runErr)
	m, unlock := e.lockRun(job.Workflow, job.ID)
	m.dropAttempts()
	m.dropPending()
	unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.wfs[job.Workflow]
	delete(w.inflight, job.ID)
	e.inFlight.Add(-1)
	if w.pendingWake[job.ID] {
		delete(w.pendingWake, job.ID)
		retry = false
		e.wakeLocked(w, job.Workflow, job.ID)
	}
	if retry {
		e.holdDispatch(runErr != nil)
		e.wakeLocked(w, job.Workflow, job.ID)
	} else if runErr == nil {
		e.dispatchFailures = 0
	}
	e.pump(job.Workflow)
}

// maxDispatchDelay bounds the pause between dispatches while the runner or the store
// keeps failing.
const maxDispatchDelay = 30 * time.Second

// dispatchDelay is the pause before the next dispatch after failures failures in a row:
// Options.DispatchRetry, doubled per failure up to maxDispatchDelay. The runner and the
// store send no event when they recover, so the engine tries again, ever less often.
func dispatchDelay(base time.Duration, failures int) time.Duration {
	d := base
	for range min(failures, 16) {
		d *= 2
	}
	return min(d, maxDispatchDelay)
}

// countStoreFailure counts a failed commit of a step (err is not an answer to the
// caller, api.APIError): the runner aborts the run and its re-dispatch waits longer.
func (e *Engine) countStoreFailure(err error) {
	var ae *api.APIError
	if !errors.As(err, &ae) {
		e.metrics.failures.Inc()
		e.mu.Lock()
		e.dispatchFailures++
		e.mu.Unlock()
	}
}

// holdDispatch delays every dispatch by dispatchDelay; failed counts one more failure.
// Called with mu held.
func (e *Engine) holdDispatch(failed bool) {
	n := e.dispatchFailures
	if failed {
		e.dispatchFailures++
	}
	e.dispatchBackoff = time.Now().Add(dispatchDelay(e.o.DispatchRetry, n))
}

// finishRunTx commits a run's outcome (runErr: the runner could not be asked) and says
// whether the instance is to be dispatched again.
func (e *Engine) finishRunTx(tx *bolt.Tx, job *runJob, res *runResult, runErr error) (retry bool, err error) {
	in, gerr := store.GetInstance(tx, job.Workflow, job.ID)
	if gerr != nil || in.RunID != job.RunID {
		return false, nil // deleted, restarted or terminated meanwhile
	}
	if in.TerminateRequested != 0 && !api.Finite(in.Status) {
		// every attempt of the run has been reported: the pending terminate takes effect
		terminate(in, nowMs())
		return false, store.PutInstance(tx, in)
	}
	live := in.Status == api.StatusRunning || in.Status == api.StatusWaitingForPause
	if runErr != nil {
		return live, nil
	}
	switch res.Outcome {
	case "complete", "errored":
		if !live {
			return false, nil
		}
		if res.Outcome == "complete" {
			in.Status, in.Output = api.StatusComplete, res.Output
		} else {
			in.Status, in.Error = api.StatusErrored, res.Error
		}
		in.Ended = nowMs()
		return false, store.PutInstance(tx, in)
	}
	// suspended / aborted: the step handler already set the state
	return live, nil
}

func (e *Engine) wakeLocked(w *wfState, wfName, id string) {
	var in *api.Instance
	_ = e.db.View(func(tx *bolt.Tx) error {
		in, _ = store.GetInstance(tx, wfName, id)
		return nil
	})
	if in == nil {
		return
	}
	switch in.Status {
	case api.StatusWaiting, api.StatusRunning, api.StatusQueued, api.StatusWaitingForPause:
		e.pushReady(w, id, 0, in.Seq)
	}
}
