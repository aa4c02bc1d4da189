package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/duration"
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
	Error    *ErrorInfo      `json:"error,omitempty"`
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
	Error     *ErrorInfo      `json:"error,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
	Config    *StepConfig     `json:"config,omitempty"`
}

var abortAnswer = &StepAnswer{Action: "abort"}

func doneAnswer(s *Step) *StepAnswer {
	if s.Error != nil {
		return &StepAnswer{Action: "throw", Error: s.Error}
	}
	return &StepAnswer{Action: "cached", Result: s.Result}
}

func pendingKey(wf, id, name string, n int) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%d", wf, id, name, n)
}

func (e *Engine) dropPending(wf, id, pk string) {
	if _, ok := e.pending[pk]; !ok {
		return
	}
	delete(e.pending, pk)
	ik := string(ikey(wf, id))
	if e.pendingCount[ik]--; e.pendingCount[ik] <= 0 {
		delete(e.pendingCount, ik)
	}
}

// dropAllPending forgets an instance's uncommitted steps (restart, terminate, delete).
func (e *Engine) dropAllPending(wf, id string) {
	prefix := string(ikey(wf, id)) + "\x00"
	for k := range e.pending {
		if strings.HasPrefix(k, prefix) {
			delete(e.pending, k)
		}
	}
	delete(e.pendingCount, string(ikey(wf, id)))
}

func attemptKey(wf, id, name string, n, attempt int) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%d", wf, id, name, n, attempt)
}

type afterCommit func()

// suspendTx moves the instance to waiting until wakeAt (or paused when a pause is pending).
func (e *Engine) suspendTx(tx *bolt.Tx, in *Instance, wakeAt int64, waitType string, after *[]afterCommit) error {
	if in.Status == StatusWaitingForPause {
		in.Status = StatusPaused
	} else {
		in.Status = StatusWaiting
	}
	in.WakeAt, in.WaitType = wakeAt, waitType
	if in.Status == StatusWaiting && wakeAt > 0 {
		wf, id := in.Workflow, in.ID
		*after = append(*after, func() { e.armTimer(wf, id, wakeAt) })
	}
	return putInstance(tx, in)
}

// Step answers one step call of a run (see StepAnswer). Everything it decides is
// committed before it returns.
func (e *Engine) Step(r StepRequest) (*StepAnswer, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.wfs[r.Workflow]
	if w == nil {
		return abortAnswer, nil
	}
	var ans *StepAnswer
	// Replay fast path: a completed step is answered from a read-only transaction.
	_ = e.st.db.View(func(tx *bolt.Tx) error {
		in, err := getInstance(tx, r.Workflow, r.ID)
		if err != nil || in.RunID != r.RunID || (in.Status != StatusRunning && in.Status != StatusWaitingForPause) {
			ans = abortAnswer
			return nil
		}
		kind := r.Kind
		if kind == "sleepUntil" {
			kind = "sleep"
		}
		s, serr := getStep(tx, r.Workflow, r.ID, kind, r.Name, r.N)
		if serr == nil && s.Done {
			ans = doneAnswer(s)
			return nil
		}
		// A new step.do while running: its record is committed with its first attempt's
		// outcome (one fsync per step); until then it is pending in memory.
		if r.Kind == "do" && serr == errNotFound && in.Status == StatusRunning && int64(len(r.Name)) <= e.lim(limits.WorkflowStepNameChars) && r.Name != "" {
			pk := pendingKey(r.Workflow, r.ID, r.Name, r.N)
			cfg, ok := e.pending[pk]
			if !ok {
				ik := string(ikey(r.Workflow, r.ID))
				if in.Steps+e.pendingCount[ik] >= w.cfg.Steps {
					return nil // the slow path errors the instance
				}
				c, cerr := e.resolveConfig(&w.cfg, r.Name, r.Config)
				if cerr != nil {
					return nil
				}
				cfg = c
				e.pending[pk] = cfg
				e.pendingCount[ik]++
			}
			e.attemptStart[attemptKey(r.Workflow, r.ID, r.Name, r.N, 1)] = nowMs()
			ans = &StepAnswer{Action: "run", Attempt: 1, TimeoutMs: e.scaled(cfg.TimeoutMs), Config: &cfg}
		}
		return nil
	})
	if ans != nil {
		return ans, nil
	}
	var after []afterCommit
	err := e.update(func(tx *bolt.Tx) error {
		ans, after = nil, nil
		in, err := getInstance(tx, r.Workflow, r.ID)
		if err != nil || in.RunID != r.RunID || (in.Status != StatusRunning && in.Status != StatusWaitingForPause) {
			ans = abortAnswer
			return nil
		}
		if maxName := e.lim(limits.WorkflowStepNameChars); int64(len(r.Name)) > maxName || r.Name == "" {
			ans = &StepAnswer{Action: "throw", Error: &ErrorInfo{Name: "Error", Message: fmt.Sprintf(
				"Step name %q exceeds max length (%d chars) or invalid characters found (%s)", r.Name, maxName, e.cite(limits.WorkflowStepNameChars))}}
			return nil
		}
		kind := r.Kind
		if kind == "sleepUntil" {
			kind = "sleep"
		}
		s, serr := getStep(tx, r.Workflow, r.ID, kind, r.Name, r.N)
		if serr == nil && s.Done {
			ans = doneAnswer(s)
			return nil
		}
		// A step boundary: a pending pause takes effect here.
		if in.Status == StatusWaitingForPause {
			ans = &StepAnswer{Action: "suspend"}
			return e.suspendTx(tx, in, 0, "", &after)
		}
		now := nowMs()
		switch r.Kind {
		case "do":
			if serr != nil {
				if in.Steps >= w.cfg.Steps {
					in.Status, in.Ended = StatusErrored, now
					in.Error = &ErrorInfo{Name: "WorkflowFatalError", Message: fmt.Sprintf(
						"The limit of %d steps has been reached. This limit can be changed in your worker configuration. (%s)", w.cfg.Steps, e.cite(limits.WorkflowSteps))}
					ans = &StepAnswer{Action: "throw", Error: in.Error}
					return putInstance(tx, in)
				}
				cfg, cerr := e.resolveConfig(&w.cfg, r.Name, r.Config)
				if cerr != nil {
					ans = &StepAnswer{Action: "throw", Error: &ErrorInfo{Name: "Error", Message: cerr.Error()}}
					return nil
				}
				in.Steps++
				s = &Step{Kind: "do", Name: r.Name, N: r.N, Config: &cfg}
				if err := putStep(tx, r.Workflow, r.ID, s); err != nil {
					return err
				}
				if err := putInstance(tx, in); err != nil {
					return err
				}
			}
			if s.WakeAt > now {
				ans = &StepAnswer{Action: "suspend"}
				return e.suspendTx(tx, in, s.WakeAt, "", &after)
			}
			attempt := len(s.Attempts) + 1
			e.attemptStart[attemptKey(r.Workflow, r.ID, r.Name, r.N, attempt)] = now
			ans = &StepAnswer{Action: "run", Attempt: attempt, TimeoutMs: e.scaled(s.Config.TimeoutMs), Config: s.Config}
			return nil
		case "sleep", "sleepUntil":
			if serr != nil {
				var wake int64
				if r.Kind == "sleep" {
					d, derr := duration.ParseJSON("step.sleep duration", r.Duration)
					if derr == nil && d > e.lim(limits.WorkflowSleepMs) {
						derr = fmt.Errorf("step.sleep %q: %d ms is over the %d ms limit (%s)", r.Name, d, e.lim(limits.WorkflowSleepMs), e.cite(limits.WorkflowSleepMs))
					}
					if derr != nil {
						ans = &StepAnswer{Action: "throw", Error: &ErrorInfo{Name: "Error", Message: derr.Error()}}
						return nil
					}
					wake = now + e.scaled(d)
				} else {
					d := r.Until - now
					if d > e.lim(limits.WorkflowSleepMs) {
						ans = &StepAnswer{Action: "throw", Error: &ErrorInfo{Name: "Error", Message: fmt.Sprintf(
							"step.sleepUntil %q: %d ms from now is over the %d ms limit (%s)", r.Name, d, e.lim(limits.WorkflowSleepMs), e.cite(limits.WorkflowSleepMs))}}
						return nil
					}
					wake = now + e.scaled(max(d, 0))
				}
				s = &Step{Kind: "sleep", Name: r.Name, N: r.N, WakeAt: wake}
			}
			if now >= s.WakeAt {
				s.Done, s.CommittedAt = true, now
				ans = doneAnswer(s)
				return putStep(tx, r.Workflow, r.ID, s)
			}
			if err := putStep(tx, r.Workflow, r.ID, s); err != nil {
				return err
			}
			ans = &StepAnswer{Action: "suspend"}
			return e.suspendTx(tx, in, s.WakeAt, "", &after)
		case "waitForEvent":
			if err := e.checkName("waitForEvent type", r.Type, limits.WorkflowEventTypeChars); err != nil {
				ans = &StepAnswer{Action: "throw", Error: &ErrorInfo{Name: "Error", Message: "(workflow.invalid_event_type) " + err.Error()}}
				return nil
			}
			if serr != nil {
				timeout := int64(24 * 3600 * 1000)
				if len(r.Timeout) > 0 && string(r.Timeout) != "null" {
					d, derr := duration.ParseJSON("waitForEvent timeout", r.Timeout)
					if derr == nil && (d < 1000 || d > e.lim(limits.WorkflowSleepMs)) {
						derr = fmt.Errorf("waitForEvent %q timeout %d ms: want 1 s to %d ms (%s)", r.Name, d, e.lim(limits.WorkflowSleepMs), e.cite(limits.WorkflowSleepMs))
					}
					if derr != nil {
						ans = &StepAnswer{Action: "throw", Error: &ErrorInfo{Name: "Error", Message: derr.Error()}}
						return nil
					}
					timeout = d
				}
				s = &Step{Kind: "waitForEvent", Name: r.Name, N: r.N, WakeAt: now + e.scaled(timeout), Config: &StepConfig{TimeoutMs: timeout}}
			}
			// The oldest unconsumed event of this type, if any.
			if b, _ := eventBucket(tx, r.Workflow, r.ID, false); b != nil {
				c := b.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					var ev Event
					if err := json.Unmarshal(v, &ev); err != nil {
						return err
					}
					if ev.Consumed || ev.Type != r.Type {
						continue
					}
					ev.Consumed = true
					nv, _ := json.Marshal(ev)
					if err := b.Put(k, nv); err != nil {
						return err
					}
					payload := ev.Payload
					if len(payload) == 0 {
						payload = json.RawMessage("null")
					}
					res, _ := json.Marshal(map[string]any{"payload": payload, "timestamp": ev.Timestamp, "type": ev.Type})
					s.Done, s.Result, s.CommittedAt = true, res, now
					ans = doneAnswer(s)
					return putStep(tx, r.Workflow, r.ID, s)
				}
			}
			if now >= s.WakeAt {
				s.Done, s.CommittedAt = true, now
				s.Error = &ErrorInfo{Name: "WorkflowTimeoutError", Message: fmt.Sprintf("Execution timed out after %dms", s.Config.TimeoutMs)}
				ans = doneAnswer(s)
				return putStep(tx, r.Workflow, r.ID, s)
			}
			if err := putStep(tx, r.Workflow, r.ID, s); err != nil {
				return err
			}
			ans = &StepAnswer{Action: "suspend"}
			return e.suspendTx(tx, in, s.WakeAt, r.Type, &after)
		}
		ans = &StepAnswer{Action: "throw", Error: &ErrorInfo{Name: "Error", Message: fmt.Sprintf("unknown step kind %q", r.Kind)}}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range after {
		f()
	}
	return ans, nil
}

// Attempt commits one step.do attempt and answers: cached (the result to return), throw
// (retries exhausted or NonRetryableError), run (retry now, delay 0), suspend (retry
// after a delay, or a pause took effect) or abort (stale run).
func (e *Engine) Attempt(r AttemptReport) (*StepAnswer, error) {
	// Group commit: the in-memory state is read under the lock, the commit goes through
	// bbolt's Batch (concurrent attempts share one fsync; the function re-reads everything
	// from the transaction, so a retried batch is safe), and the after-commit actions run
	// under the lock again.
	pk := pendingKey(r.Workflow, r.ID, r.Name, r.N)
	ak := attemptKey(r.Workflow, r.ID, r.Name, r.N, r.Attempt)
	e.mu.Lock()
	if e.wfs[r.Workflow] == nil {
		e.mu.Unlock()
		return abortAnswer, nil
	}
	pcfg, havePending := e.pending[pk]
	start := e.attemptStart[ak]
	e.mu.Unlock()
	var ans *StepAnswer
	var after []afterCommit
	var nextAttempt struct {
		key string
		at  int64
	}
	err := e.st.db.Batch(func(tx *bolt.Tx) error {
		ans, after = nil, nil
		nextAttempt.key = ""
		in, err := getInstance(tx, r.Workflow, r.ID)
		if err != nil || in.RunID != r.RunID || (in.Status != StatusRunning && in.Status != StatusWaitingForPause) {
			ans = abortAnswer
			return nil
		}
		s, err := getStep(tx, r.Workflow, r.ID, "do", r.Name, r.N)
		if err != nil {
			if !havePending {
				ans = abortAnswer
				return nil
			}
			cfg := pcfg
			s = &Step{Kind: "do", Name: r.Name, N: r.N, Config: &cfg}
			in.Steps++
			if err := putInstance(tx, in); err != nil {
				return err
			}
			after = append(after, func() { e.dropPending(r.Workflow, r.ID, pk) })
		}
		if s.Done {
			ans = doneAnswer(s)
			return nil
		}
		if r.Attempt != len(s.Attempts)+1 {
			ans = abortAnswer
			return nil
		}
		now := nowMs()
		if start == 0 {
			start = now
		}
		after = append(after, func() { delete(e.attemptStart, ak) })
		a := Attempt{N: r.Attempt, Start: start, End: now}
		errInfo := r.Error
		nonRetryable := false
		if r.OK {
			if max := e.lim(limits.WorkflowStepResultBytes); int64(len(r.Result)) > max {
				errInfo = &ErrorInfo{Name: "Error", Message: fmt.Sprintf("Step %s-%d output is too large. Maximum allowed size is 1MiB. (%d bytes; %s)", r.Name, r.N, len(r.Result), e.cite(limits.WorkflowStepResultBytes))}
				nonRetryable = true
			} else {
				s.Attempts = append(s.Attempts, a)
				s.Done, s.Result, s.CommittedAt = true, r.Result, now
				if err := putStep(tx, r.Workflow, r.ID, s); err != nil {
					return err
				}
				if in.Status == StatusWaitingForPause {
					ans = &StepAnswer{Action: "suspend"}
					return e.suspendTx(tx, in, 0, "", &after)
				}
				ans = doneAnswer(s)
				return nil
			}
		}
		if errInfo == nil {
			errInfo = &ErrorInfo{Name: "Error", Message: "step failed"}
		}
		nonRetryable = nonRetryable || errInfo.Name == "NonRetryableError"
		a.Error = errInfo
		if nonRetryable || r.Attempt > s.Config.Retries.Limit {
			s.Attempts = append(s.Attempts, a)
			s.Done, s.Error, s.CommittedAt = true, errInfo, now
			if err := putStep(tx, r.Workflow, r.ID, s); err != nil {
				return err
			}
			if in.Status == StatusWaitingForPause {
				ans = &StepAnswer{Action: "suspend"}
				return e.suspendTx(tx, in, 0, "", &after)
			}
			ans = doneAnswer(s)
			return nil
		}
		delay := s.Config.DelayMs(r.Attempt)
		a.RetryDelayMs = &delay
		s.Attempts = append(s.Attempts, a)
		s.WakeAt = now + e.scaled(delay)
		if err := putStep(tx, r.Workflow, r.ID, s); err != nil {
			return err
		}
		if in.Status == StatusWaitingForPause || delay > 0 {
			ans = &StepAnswer{Action: "suspend"}
			return e.suspendTx(tx, in, s.WakeAt, "", &after)
		}
		next := r.Attempt + 1
		nextAttempt.key, nextAttempt.at = attemptKey(r.Workflow, r.ID, r.Name, r.N, next), now
		ans = &StepAnswer{Action: "run", Attempt: next, TimeoutMs: e.scaled(s.Config.TimeoutMs), Config: s.Config}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range after {
		f()
	}
	if nextAttempt.key != "" {
		e.attemptStart[nextAttempt.key] = nextAttempt.at
	}
	return ans, nil
}
