package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"

	bolt "go.etcd.io/bbolt"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
	"github.com/workerd-operator/workerd-operator/internal/workflows/duration"
	"github.com/workerd-operator/workerd-operator/internal/workflows/store"
)

// StepRequest is the runner's question about one step call (POST /workflows/_run/step).
type StepRequest struct {
	Workflow string `json:"workflow"`
	ID       string `json:"id"`
	RunID    uint64 `json:"runId"`
	// Kind: do, sleep, sleepUntil or waitForEvent.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// N is the occurrence count of (kind, name) in this run, 1-based.
	N int `json:"count"`
	// Config is step.do's config as given (JSON).
	Config json.RawMessage `json:"config,omitempty"`
	// Duration is step.sleep's duration (ms or "<n> <unit>").
	Duration json.RawMessage `json:"duration,omitempty"`
	// Until is step.sleepUntil's time in ms since the epoch.
	Until int64 `json:"until,omitempty"`
	// Type and Timeout are waitForEvent's options.
	Type    string          `json:"type,omitempty"`
	Timeout json.RawMessage `json:"timeout,omitempty"`
}

// AttemptReport is the runner's report of one step.do attempt (POST /workflows/_run/attempt).
type AttemptReport struct {
	Workflow string          `json:"workflow"`
	ID       string          `json:"id"`
	RunID    uint64          `json:"runId"`
	Name     string          `json:"name"`
	N        int             `json:"count"`
	Attempt  int             `json:"attempt"`
	OK       bool            `json:"ok"`
	Result   json.RawMessage `json:"result,omitempty"` // absent = undefined
	// ResultBytes is the size of a result the runner did not send because it is over
	// StepAnswer.MaxResultBytes (the step fails as too large).
	ResultBytes int64          `json:"resultBytes,omitempty"`
	Error       *api.ErrorInfo `json:"error,omitempty"`
	// NonRetryable: the step fails for good whatever its retries (its delay function failed).
	NonRetryable bool `json:"nonRetryable,omitempty"`
	// Fatal: the step ends the instance, errored with Error, whatever run() does about it
	// (its value cannot be serialised, as the built-in engine rules).
	Fatal bool `json:"fatal,omitempty"`
	// RetryDelay is what the step's retries.delay function returned for this failed
	// attempt (ms or a duration string); the backoff applies to it. Absent: the config's delay.
	RetryDelay json.RawMessage `json:"retryDelay,omitempty"`
}

// StepAnswer tells the runner what to do.
//   - cached: return Result (absent = undefined) without running anything
//   - throw: throw Error into the workflow
//   - run: run attempt Attempt of the step.do callback with TimeoutMs
//   - suspend: end the run now (the engine wakes it later); nothing is thrown into user code
//   - abort: the run is stale (terminated, restarted, re-dispatched): end it
type StepAnswer struct {
	Action    string          `json:"action"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *api.ErrorInfo  `json:"error,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
	Config    *api.StepConfig `json:"config,omitempty"`
	// MaxResultBytes (run) is the largest result to send back: a larger one is
	// reported by its size alone (AttemptReport.ResultBytes).
	MaxResultBytes int64 `json:"maxResultBytes,omitempty"`
}

var abortAnswer = &StepAnswer{Action: "abort"}

// runAnswer tells the runner to run attempt n of a step.do callback.
func (e *Engine) runAnswer(n int, timeoutMs int64, cfg *api.StepConfig) *StepAnswer {
	return &StepAnswer{Action: "run", Attempt: n, TimeoutMs: e.scaled(timeoutMs), Config: cfg, MaxResultBytes: e.lim(limits.WorkflowStepResultBytes)}
}

func doneAnswer(s *api.Step) *StepAnswer {
	if s.Error != nil {
		return &StepAnswer{Action: "throw", Error: s.Error}
	}
	return &StepAnswer{Action: "cached", Result: s.Result}
}

// afterCommit is what a step call or an attempt report changes in memory once its
// commit is on the disk; it runs with the instance's run lock held.
type afterCommit func(m *runMem)

// suspendTx moves the instance to waiting until wakeAt (or paused when a pause is pending).
func (e *Engine) suspendTx(tx *bolt.Tx, in *api.Instance, wakeAt int64, waitType string, after *[]afterCommit) error {
	if in.Status == api.StatusWaitingForPause {
		in.Status = api.StatusPaused
	} else {
		in.Status = api.StatusWaiting
	}
	in.WakeAt, in.WaitType = wakeAt, waitType
	if in.Status == api.StatusWaiting && wakeAt > 0 {
		wf, id := in.Workflow, in.ID
		*after = append(*after, func(*runMem) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.armTimer(wf, id, wakeAt)
		})
	}
	return store.PutInstance(tx, in)
}

// Step answers one step call of a run (see StepAnswer). Everything it decides is
// committed before it returns.
func (e *Engine) Step(r StepRequest) (*StepAnswer, error) {
	w := e.wfs[r.Workflow]
	if w == nil || e.stopping.Load() {
		return abortAnswer, nil
	}
	// Replay: a completed step (or a stale run) is answered from a read-only
	// transaction, with no lock.
	var ans *StepAnswer
	_ = e.db.View(func(tx *bolt.Tx) error {
		_, ans = e.lookupStep(tx, r)
		return nil
	})
	if ans != nil {
		return ans, nil
	}
	m, unlock := e.lockRun(r.Workflow, r.ID)
	defer unlock()
	// A new step.do while running: read-only too, pending in memory until its first
	// attempt's outcome is committed with its record (one fsync per step).
	_ = e.db.View(func(tx *bolt.Tx) error {
		ans = e.stepFast(tx, w, r, m)
		return nil
	})
	if ans != nil {
		return e.confirmRun(m, r.Name, r.N, ans), nil
	}
	var after []afterCommit
	err := e.commit(func(tx *bolt.Tx) error {
		var err error
		after = nil
		ans, err = e.stepTx(tx, w, r, &after)
		return err
	})
	if err != nil {
		e.countStoreFailure(err)
		return nil, err
	}
	for _, f := range after {
		f(m)
	}
	return e.confirmRun(m, r.Name, r.N, ans), nil
}

// confirmRun withdraws a run answer when a shutdown began meanwhile: the attempt was
// counted before stopping is read, so Quiesce either waits for it or it never starts.
// Called with the run lock held.
func (e *Engine) confirmRun(m *runMem, name string, n int, ans *StepAnswer) *StepAnswer {
	if ans.Action != "run" || !e.stopping.Load() {
		return ans
	}
	m.endAttempt(attemptKey(name, n, ans.Attempt))
	return abortAnswer
}

// stepState is what a step call finds in the store: its instance and its step record
// (serr != nil: no record yet).
type stepState struct {
	in   *api.Instance
	s    *api.Step
	serr error
}

// lookupStep reads r's instance and step. The answer is not nil when the call is
// answered already: abort (stale run) or the completed step's outcome.
func (e *Engine) lookupStep(tx *bolt.Tx, r StepRequest) (stepState, *StepAnswer) {
	in, err := store.GetInstance(tx, r.Workflow, r.ID)
	if err != nil || in.RunID != r.RunID || in.TerminateRequested != 0 || (in.Status != api.StatusRunning && in.Status != api.StatusWaitingForPause) {
		return stepState{}, abortAnswer
	}
	kind := r.Kind
	if kind == "sleepUntil" {
		kind = "sleep"
	}
	s, serr := store.GetStep(tx, r.Workflow, r.ID, kind, r.Name, r.N)
	if serr == nil && s.Done {
		return stepState{}, doneAnswer(s)
	}
	return stepState{in: in, s: s, serr: serr}, nil
}

// stepFast answers from a read-only transaction, or nil to take the slow path. A new
// step.do while running is pending in memory: its record is committed with its first
// attempt's outcome (one fsync per step).
func (e *Engine) stepFast(tx *bolt.Tx, w *wfState, r StepRequest, m *runMem) *StepAnswer {
	st, ans := e.lookupStep(tx, r)
	if ans != nil || r.Kind != "do" || st.serr != store.ErrNotFound || st.in.Status != api.StatusRunning || e.checkStepName(r.Name) != nil {
		return ans
	}
	sk := stepKey(r.Name, r.N)
	cfg, ok := m.pending[sk]
	if !ok {
		if st.in.Steps+len(m.pending) >= w.cfg.Steps {
			return nil // the slow path errors the instance
		}
		c, err := e.resolveConfig(&w.cfg, r.Name, r.Config)
		if err != nil {
			return nil
		}
		cfg = c
		m.pending[sk] = cfg
	}
	m.startAttempt(attemptKey(r.Name, r.N, 1), nowMs())
	return e.runAnswer(1, cfg.TimeoutMs, &cfg)
}

// stepTx answers a step call in a read-write transaction.
func (e *Engine) stepTx(tx *bolt.Tx, w *wfState, r StepRequest, after *[]afterCommit) (*StepAnswer, error) {
	st, ans := e.lookupStep(tx, r)
	if ans != nil {
		return ans, nil
	}
	if err := e.checkStepName(r.Name); err != nil {
		return throwAnswer("WorkflowFatalError", err.Error()), nil
	}
	// A step boundary: a pending pause takes effect here.
	if st.in.Status == api.StatusWaitingForPause {
		return suspendAnswer, e.suspendTx(tx, st.in, 0, "", after)
	}
	switch r.Kind {
	case "do":
		return e.doTx(tx, w, r, st, after)
	case "sleep", "sleepUntil":
		return e.sleepTx(tx, r, st, after)
	case "waitForEvent":
		return e.waitTx(tx, r, st, after)
	}
	return throwAnswer("Error", fmt.Sprintf("unknown step kind %q", r.Kind)), nil
}

// checkStepName: up to the step name limit's characters as JavaScript counts them (UTF-16
// code units), none of them a control character; the empty name is valid, as in
// Cloudflare's validator (workers-sdk packages/workflows-shared/src/lib/validators.ts).
func (e *Engine) checkStepName(name string) error {
	if maxName := e.lim(limits.WorkflowStepNameChars); int64(len(utf16.Encode([]rune(name)))) > maxName || hasControlChar(name) {
		return fmt.Errorf("Step name %q exceeds max length (%d chars) or invalid characters found (%s)", name, maxName, e.cite(limits.WorkflowStepNameChars))
	}
	return nil
}

func hasControlChar(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 })
}

var suspendAnswer = &StepAnswer{Action: "suspend"}

func throwAnswer(name, message string) *StepAnswer {
	return &StepAnswer{Action: "throw", Error: &api.ErrorInfo{Name: name, Message: message}}
}

// doTx records a new step.do (or errors the instance past its step limit) and answers
// run for its next attempt, or suspend until its retry delay has passed.
func (e *Engine) doTx(tx *bolt.Tx, w *wfState, r StepRequest, st stepState, after *[]afterCommit) (*StepAnswer, error) {
	in, s, now := st.in, st.s, nowMs()
	if st.serr != nil {
		if in.Steps >= w.cfg.Steps {
			in.Status, in.Ended = api.StatusErrored, now
			in.Error = &api.ErrorInfo{Name: "WorkflowFatalError", Message: fmt.Sprintf(
				"The limit of %d steps has been reached. This limit can be changed in your worker configuration. (%s)", w.cfg.Steps, e.cite(limits.WorkflowSteps))}
			return &StepAnswer{Action: "throw", Error: in.Error}, store.PutInstance(tx, in)
		}
		cfg, err := e.resolveConfig(&w.cfg, r.Name, r.Config)
		if err != nil {
			return throwAnswer("WorkflowFatalError", err.Error()), nil
		}
		in.Steps++
		s = &api.Step{Kind: "do", Name: r.Name, N: r.N, Config: &cfg}
		if err := store.PutStep(tx, r.Workflow, r.ID, s); err != nil {
			return nil, err
		}
		if err := store.PutInstance(tx, in); err != nil {
			return nil, err
		}
	}
	if s.WakeAt > now {
		return suspendAnswer, e.suspendTx(tx, in, s.WakeAt, "", after)
	}
	attempt := len(s.Attempts) + 1
	ak := attemptKey(r.Name, r.N, attempt)
	*after = append(*after, func(m *runMem) { m.startAttempt(ak, now) })
	return e.runAnswer(attempt, s.Config.TimeoutMs, s.Config), nil
}

// sleepTx records a sleep's deadline and answers its completion once it has passed,
// else suspend until then.
func (e *Engine) sleepTx(tx *bolt.Tx, r StepRequest, st stepState, after *[]afterCommit) (*StepAnswer, error) {
	s, now := st.s, nowMs()
	if st.serr != nil {
		wake, err := e.sleepDeadline(r, now)
		if err != nil {
			return throwAnswer("Error", err.Error()), nil
		}
		s = &api.Step{Kind: "sleep", Name: r.Name, N: r.N, WakeAt: wake}
	}
	if now >= s.WakeAt {
		s.Done, s.CommittedAt = true, now
		return doneAnswer(s), store.PutStep(tx, r.Workflow, r.ID, s)
	}
	if err := store.PutStep(tx, r.Workflow, r.ID, s); err != nil {
		return nil, err
	}
	return suspendAnswer, e.suspendTx(tx, st.in, s.WakeAt, "", after)
}

// sleepDeadline is when a new step.sleep or step.sleepUntil called at now ends (scaled).
// Errors: a duration that does not parse or is over the sleep limit.
func (e *Engine) sleepDeadline(r StepRequest, now int64) (int64, error) {
	maxMs := e.lim(limits.WorkflowSleepMs)
	if r.Kind == "sleep" {
		d, err := duration.ParseJSON("step.sleep duration", r.Duration)
		if err == nil && d > maxMs {
			err = fmt.Errorf("step.sleep %q: %d ms is over the %d ms limit (%s)", r.Name, d, maxMs, e.cite(limits.WorkflowSleepMs))
		}
		return now + e.scaled(d), err
	}
	d := r.Until - now
	if d > maxMs {
		return 0, fmt.Errorf("step.sleepUntil %q: %d ms from now is over the %d ms limit (%s)", r.Name, d, maxMs, e.cite(limits.WorkflowSleepMs))
	}
	return now + e.scaled(max(d, 0)), nil
}

// waitTx answers waitForEvent: the oldest unconsumed event of its type, a
// WorkflowTimeoutError once its timeout has passed, else suspend until either.
func (e *Engine) waitTx(tx *bolt.Tx, r StepRequest, st stepState, after *[]afterCommit) (*StepAnswer, error) {
	if err := e.checkName("waitForEvent type", r.Type, limits.WorkflowEventTypeChars); err != nil {
		return throwAnswer("Error", "(workflow.invalid_event_type) "+err.Error()), nil
	}
	s, now := st.s, nowMs()
	if st.serr != nil {
		timeout, err := e.waitTimeout(r)
		if err != nil {
			return throwAnswer("Error", err.Error()), nil
		}
		s = &api.Step{Kind: "waitForEvent", Name: r.Name, N: r.N, WakeAt: now + e.scaled(timeout), Config: &api.StepConfig{TimeoutMs: timeout}}
	}
	taken, err := takeEvent(tx, r, s, now)
	if err != nil {
		return nil, err
	}
	if !taken && now >= s.WakeAt {
		s.Done, s.CommittedAt = true, now
		s.Error = &api.ErrorInfo{Name: "WorkflowTimeoutError", Message: fmt.Sprintf("Execution timed out after %dms", s.Config.TimeoutMs)}
	}
	if err := store.PutStep(tx, r.Workflow, r.ID, s); err != nil {
		return nil, err
	}
	if s.Done {
		return doneAnswer(s), nil
	}
	return suspendAnswer, e.suspendTx(tx, st.in, s.WakeAt, r.Type, after)
}

// waitTimeout is a new waitForEvent's timeout in ms (24 hours when not given).
func (e *Engine) waitTimeout(r StepRequest) (int64, error) {
	const day = 24 * 3600 * 1000
	if len(r.Timeout) == 0 || string(r.Timeout) == "null" {
		return day, nil
	}
	maxMs := e.lim(limits.WorkflowSleepMs)
	d, err := duration.ParseJSON("waitForEvent timeout", r.Timeout)
	if err == nil && d > maxMs {
		err = fmt.Errorf("waitForEvent %q timeout %d ms: want at most %d ms (%s)", r.Name, d, maxMs, e.cite(limits.WorkflowSleepMs))
	}
	if err == nil && d == 0 {
		d = day // as a missing timeout, like Cloudflare's engine
	}
	return d, err
}

// takeEvent consumes the oldest unconsumed event of r.Type sent before the wait's deadline
// (s.WakeAt), if any, into s (done, with {payload, timestamp, type} as its result). An
// event sent after the deadline, while the instance could not run (the runner down, no
// concurrency slot), is left for the next wait: this one has timed out.
func takeEvent(tx *bolt.Tx, r StepRequest, s *api.Step, now int64) (bool, error) {
	b, _ := store.EventBucket(tx, r.Workflow, r.ID, false)
	if b == nil {
		return false, nil
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var ev store.Event
		if err := json.Unmarshal(v, &ev); err != nil {
			return false, err
		}
		if ev.Consumed || ev.Type != r.Type {
			continue
		}
		if s.WakeAt > 0 && ev.Timestamp >= s.WakeAt {
			return false, nil // events are in sending order: every later one is late too
		}
		ev.Consumed = true
		nv, _ := json.Marshal(ev)
		if err := b.Put(k, nv); err != nil {
			return false, err
		}
		payload := ev.Payload
		if len(payload) == 0 {
			payload = json.RawMessage("null")
		}
		res, _ := json.Marshal(map[string]any{"payload": payload, "timestamp": ev.Timestamp, "type": ev.Type})
		s.Done, s.Result, s.CommittedAt = true, res, now
		return true, nil
	}
	return false, nil
}

// Attempt commits one step.do attempt and answers: cached (the result to return), throw
// (retries exhausted or NonRetryableError), run (retry now, delay 0), suspend (retry
// after a delay, or a pause took effect) or abort (stale run).
func (e *Engine) Attempt(r AttemptReport) (*StepAnswer, error) {
	// Group commit: the run's memory is read under its run lock, the commit goes with
	// the concurrent ones (attemptTx re-reads everything from the transaction, so a
	// group committed again is safe), and the after-commit changes run under the run
	// lock again.
	if e.wfs[r.Workflow] == nil {
		return abortAnswer, nil
	}
	sk, ak := stepKey(r.Name, r.N), attemptKey(r.Name, r.N, r.Attempt)
	m, unlock := e.lockRun(r.Workflow, r.ID)
	pending, havePending := m.pending[sk]
	start, inflight := m.attempts[ak]
	c := &attemptCommit{r: r, start: start, inflight: inflight, others: m.inFlight(ak), stopping: e.stopping.Load()}
	if havePending {
		c.pending = &pending
	}
	rerun := e.infraRerun(m, r, ak)
	unlock()
	if rerun {
		return abortAnswer, nil
	}
	var ans *StepAnswer
	var after []afterCommit
	c.after = &after
	err := e.commit(func(tx *bolt.Tx) error {
		var err error
		after = nil
		ans, err = e.attemptTx(tx, c)
		return err
	})
	if err != nil {
		e.countStoreFailure(err)
		return nil, err
	}
	if ans != abortAnswer {
		e.metrics.attempts.WithLabelValues(r.Workflow).Inc()
	}
	m, unlock = e.lockRun(r.Workflow, r.ID)
	defer unlock()
	for _, f := range after {
		f(m)
	}
	return e.confirmRun(m, r.Name, r.N, ans), nil
}

// attemptCommit is one Attempt's input to its transaction and what runs after it.
type attemptCommit struct {
	r AttemptReport
	// pending is the config of the step when it was still pending in memory.
	pending *api.StepConfig
	// start is when the engine answered run for this attempt (0: unknown).
	start int64
	// inflight: the engine answered run for this attempt and has not had its report yet
	// (a terminate since then still takes the report).
	inflight bool
	// others: other attempts of the instance are in flight (a pending pause waits for them).
	others bool
	// stopping: the engine is shutting down; after this commit the run ends.
	stopping bool
	after    *[]afterCommit
}

func (c *attemptCommit) then(f afterCommit) { *c.after = append(*c.after, f) }

// attemptTx records the attempt in its step and decides what follows.
func (e *Engine) attemptTx(tx *bolt.Tx, c *attemptCommit) (*StepAnswer, error) {
	r := c.r
	// A report of the current run is committed even when another branch of it already
	// ended the run (pause, sleep) or the instance was terminated meanwhile: the run
	// waits for its attempts in flight and no result is lost.
	in, err := store.GetInstance(tx, r.Workflow, r.ID)
	if err != nil || in.RunID != r.RunID || (api.Finite(in.Status) && !(in.Status == api.StatusTerminated && c.inflight)) {
		return abortAnswer, nil
	}
	s, err := store.GetStep(tx, r.Workflow, r.ID, "do", r.Name, r.N)
	if err != nil {
		if c.pending == nil {
			return abortAnswer, nil
		}
		s = &api.Step{Kind: "do", Name: r.Name, N: r.N, Config: c.pending}
		in.Steps++
		if err := store.PutInstance(tx, in); err != nil {
			return nil, err
		}
		sk := stepKey(r.Name, r.N)
		c.then(func(m *runMem) { delete(m.pending, sk) })
	}
	if s.Done {
		return doneAnswer(s), nil
	}
	if r.Attempt != len(s.Attempts)+1 {
		return abortAnswer, nil
	}
	now := nowMs()
	if c.start == 0 {
		c.start = now
	}
	ak := attemptKey(r.Name, r.N, r.Attempt)
	c.then(func(m *runMem) { m.endAttempt(ak) })
	a := api.Attempt{N: r.Attempt, Start: c.start, End: now}
	errInfo, nonRetryable := r.Error, false
	if r.OK {
		size := max(int64(len(r.Result)), r.ResultBytes)
		if maxBytes := e.lim(limits.WorkflowStepResultBytes); size <= maxBytes && r.ResultBytes == 0 {
			s.Attempts = append(s.Attempts, a)
			s.Done, s.Result, s.CommittedAt = true, r.Result, now
			return e.settleTx(tx, in, s, c)
		}
		errInfo = &api.ErrorInfo{Name: "Error", Message: fmt.Sprintf("Step %s-%d output is too large. Maximum allowed size is 1MiB. (%d bytes; %s)", r.Name, r.N, size, e.cite(limits.WorkflowStepResultBytes))}
		nonRetryable = true
	}
	if errInfo == nil {
		errInfo = &api.ErrorInfo{Name: "Error", Message: "step failed"}
	}
	a.Error = errInfo
	// A fatal report errors the instance, unless it has ended or a terminate is pending:
	// those win, as for any step that is done.
	if r.Fatal && !api.Finite(in.Status) && in.TerminateRequested == 0 {
		s.Attempts = append(s.Attempts, a)
		s.Done, s.Error, s.CommittedAt = true, errInfo, now
		in.Status, in.Ended, in.Error = api.StatusErrored, now, errInfo
		if err := store.PutStep(tx, in.Workflow, in.ID, s); err != nil {
			return nil, err
		}
		return &StepAnswer{Action: "throw", Error: errInfo}, store.PutInstance(tx, in)
	}
	if nonRetryable || r.NonRetryable || r.Fatal || errInfo.Name == "NonRetryableError" || r.Attempt > s.Config.Retries.Limit {
		s.Attempts = append(s.Attempts, a)
		s.Done, s.Error, s.CommittedAt = true, errInfo, now
		return e.settleTx(tx, in, s, c)
	}
	return e.retryTx(tx, in, s, a, c)
}

// settleTx commits a step that is done: its outcome goes back to the run, or the run
// ends here when a pause or a terminate is pending, the engine is stopping, or the run
// has ended already (terminated: abort).
func (e *Engine) settleTx(tx *bolt.Tx, in *api.Instance, s *api.Step, c *attemptCommit) (*StepAnswer, error) {
	if err := store.PutStep(tx, in.Workflow, in.ID, s); err != nil {
		return nil, err
	}
	switch {
	case api.Finite(in.Status) || c.stopping || in.TerminateRequested != 0:
		return abortAnswer, nil
	case in.Status == api.StatusRunning:
		return doneAnswer(s), nil
	case in.Status == api.StatusWaitingForPause:
		return suspendAnswer, e.pauseTx(tx, in, c)
	}
	return suspendAnswer, nil
}

// pauseTx lets a pending pause take effect after an attempt settled, unless other
// attempts of the run are still in flight: the last of them to settle pauses.
func (e *Engine) pauseTx(tx *bolt.Tx, in *api.Instance, c *attemptCommit) error {
	if c.others {
		return nil
	}
	return e.suspendTx(tx, in, 0, "", c.after)
}

// retryTx commits failed attempt a of s with its retry delay: the next attempt runs now
// (delay 0) or the run suspends until the delay has passed.
func (e *Engine) retryTx(tx *bolt.Tx, in *api.Instance, s *api.Step, a api.Attempt, c *attemptCommit) (*StepAnswer, error) {
	r := c.r
	delay := s.Config.DelayMs(r.Attempt)
	if len(r.RetryDelay) > 0 {
		base, err := duration.ParseJSON("retries.delay", r.RetryDelay)
		if err != nil {
			a.Error = &api.ErrorInfo{Name: "NonRetryableDelayError", Message: fmt.Sprintf(
				`The delay function for step "%s-%d" returned an invalid delay value (expected a number of ms or a duration string like "30 seconds"): %v`, r.Name, r.N, err)}
			s.Attempts = append(s.Attempts, a)
			s.Done, s.Error, s.CommittedAt = true, a.Error, a.End
			return e.settleTx(tx, in, s, c)
		}
		delay = s.Config.Backoff(base, r.Attempt)
	}
	a.RetryDelayMs = &delay
	s.Attempts = append(s.Attempts, a)
	s.WakeAt = a.End + e.scaled(delay)
	if err := store.PutStep(tx, r.Workflow, r.ID, s); err != nil {
		return nil, err
	}
	switch {
	case api.Finite(in.Status) || c.stopping || in.TerminateRequested != 0:
		return abortAnswer, nil // no attempt starts after a terminate or during a shutdown
	case in.Status != api.StatusRunning && in.Status != api.StatusWaitingForPause:
		return suspendAnswer, nil // the run has ended; the replay waits for s.WakeAt
	case in.Status == api.StatusWaitingForPause:
		return suspendAnswer, e.pauseTx(tx, in, c)
	case delay > 0:
		return suspendAnswer, e.suspendTx(tx, in, s.WakeAt, "", c.after)
	}
	next, key := r.Attempt+1, attemptKey(r.Name, r.N, r.Attempt+1)
	c.then(func(m *runMem) { m.startAttempt(key, a.End) })
	return e.runAnswer(next, s.Config.TimeoutMs, s.Config), nil
}
