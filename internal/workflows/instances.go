package workflows

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
	"github.com/workerd-operator/workerd-operator/internal/workflows/store"
)

// The instance API of the engine: create, read, page, pause, resume, terminate, restart,
// delete, events and counts (docs/workflows.md "API").

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (e *Engine) validateCreate(o *api.CreateOptions) *api.APIError {
	if o.ID == "" {
		o.ID = newID()
	}
	if err := e.checkName("id", o.ID, limits.WorkflowInstanceIDChars); err != nil {
		return api.Errorf(400, "instance.invalid_id", "Workflow instance has invalid id: %v", err)
	}
	if err := e.checkPayload("params", o.Params); err != nil {
		return api.Errorf(400, "instance.params_too_large", "%v", err)
	}
	return nil
}

// Create makes a queued instance. Errors: invalid id or params (400), unknown workflow
// (404), id in use (409, code 10405).
func (e *Engine) Create(wfName string, o api.CreateOptions) (*api.Instance, error) {
	w, err := e.wf(wfName)
	if err != nil {
		return nil, err
	}
	if aerr := e.validateCreate(&o); aerr != nil {
		return nil, aerr
	}
	var in *api.Instance
	err = e.commit(func(tx *bolt.Tx) error {
		var cerr error
		in, cerr = e.createTx(tx, wfName, o)
		return cerr
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pushReady(w, in.ID, 1, in.Seq)
	e.pump(wfName)
	return in, nil
}

func (e *Engine) createTx(tx *bolt.Tx, wfName string, o api.CreateOptions) (*api.Instance, error) {
	if _, err := store.GetInstance(tx, wfName, o.ID); err == nil {
		return nil, api.Errorf(409, api.CodeInstanceExists, "An instance with this ID already exists: %q (use restart to run it again)", o.ID)
	}
	in := &api.Instance{Workflow: wfName, ID: o.ID, Seq: store.NextSeq(tx, "instance-seq"), Status: api.StatusQueued, Params: o.Params, Created: nowMs(),
		Schedule: o.Schedule, ScheduledMs: o.ScheduledMs}
	return in, store.PutInstance(tx, in)
}

// CreateBatch creates up to 100 instances in one commit. Invalid options fail the whole
// call before anything is created; duplicates are reported per entry (10405 in use,
// 10415 repeated in the batch).
func (e *Engine) CreateBatch(wfName string, opts []api.CreateOptions) ([]*api.Instance, []api.BatchError, error) {
	if len(opts) < 1 || len(opts) > 100 {
		return nil, nil, api.Errorf(400, "batch.invalid_size", "createBatch: %d instances; want 1 to 100", len(opts))
	}
	w, err := e.wf(wfName)
	if err != nil {
		return nil, nil, err
	}
	for i := range opts {
		if aerr := e.validateCreate(&opts[i]); aerr != nil {
			aerr.Message = fmt.Sprintf("instances[%d]: %s", i, aerr.Message)
			return nil, nil, aerr
		}
	}
	var created []*api.Instance
	var errs []api.BatchError
	err = e.commit(func(tx *bolt.Tx) error {
		created, errs = nil, nil
		seen := map[string]bool{}
		for i, o := range opts {
			if seen[o.ID] {
				errs = append(errs, api.BatchError{Index: i, ID: o.ID, Code: 10415, Message: "An earlier entry in the same batch uses this ID"})
				continue
			}
			seen[o.ID] = true
			in, cerr := e.createTx(tx, wfName, o)
			if cerr != nil {
				var ae *api.APIError
				if errors.As(cerr, &ae) {
					errs = append(errs, api.BatchError{Index: i, ID: o.ID, Code: 10405, Message: "An instance with this ID already exists"})
					continue
				}
				return cerr
			}
			created = append(created, in)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, in := range created {
		e.pushReady(w, in.ID, 1, in.Seq)
	}
	e.pump(wfName)
	return created, errs, nil
}

func notFound(id string) *api.APIError {
	return api.Errorf(404, "instance.not_found", "(instance.not_found) Instance does not exist: %q", id)
}

// Get returns an instance. Errors: 404 instance.not_found.
func (e *Engine) Get(wfName, id string) (*api.Instance, error) {
	if _, err := e.wf(wfName); err != nil {
		return nil, err
	}
	var in *api.Instance
	err := e.db.View(func(tx *bolt.Tx) error {
		var gerr error
		in, gerr = store.GetInstance(tx, wfName, id)
		return gerr
	})
	if err != nil {
		return nil, notFound(id)
	}
	return in, nil
}

// Steps returns a page of an instance's step records (attempt times included), in key
// order, after cursor (the previous page's Cursor). A page ends before the step that
// would take its answer over MaxResponseBytes (the first always fits: a step is at most
// its result, its error and its config).
func (e *Engine) Steps(wfName, id, cursor string) (*api.StepPage, error) {
	after, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, api.Errorf(400, "steps.invalid_cursor", "cursor %q is not one a steps page returned", cursor)
	}
	page := &api.StepPage{Steps: []api.Step{}}
	err = e.db.View(func(tx *bolt.Tx) error {
		if _, err := store.GetInstance(tx, wfName, id); err != nil {
			return notFound(id)
		}
		b, _ := store.StepBucket(tx, wfName, id, false)
		if b == nil {
			return nil
		}
		c, size, last := b.Cursor(), 0, []byte(nil)
		k, v := c.First()
		if len(after) > 0 {
			k, v = c.Seek(append(after, 0))
		}
		for ; k != nil; k, v = c.Next() {
			if n := len(page.Steps); n > 0 && size+len(v)+1 > MaxResponseBytes-envelope {
				page.Cursor = base64.RawURLEncoding.EncodeToString(last)
				return nil
			}
			var s api.Step
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			size += len(v) + 1
			page.Steps, last = append(page.Steps, s), append(last[:0], k...)
		}
		return nil
	})
	return page, err
}

// mutate loads an instance in a commit, lets f change it (f may run more than once),
// and commits.
func (e *Engine) mutate(wfName, id string, f func(tx *bolt.Tx, in *api.Instance) error) (*api.Instance, error) {
	if _, err := e.wf(wfName); err != nil {
		return nil, err
	}
	var in *api.Instance
	err := e.commit(func(tx *bolt.Tx) error {
		var gerr error
		in, gerr = store.GetInstance(tx, wfName, id)
		if gerr != nil {
			return notFound(id)
		}
		if err := f(tx, in); err != nil {
			return err
		}
		return store.PutInstance(tx, in)
	})
	return in, err
}

// Pause: running → waitingForPause (paused once the current step finishes); queued or
// waiting → paused. Other states: no effect (documented behaviour). A paused sleep keeps
// its absolute deadline: on resume a sleep whose deadline passed continues at once.
func (e *Engine) Pause(wfName, id string) (*api.Instance, error) {
	in, err := e.mutate(wfName, id, func(_ *bolt.Tx, in *api.Instance) error {
		switch in.Status {
		case api.StatusRunning:
			in.Status = api.StatusWaitingForPause
		case api.StatusQueued, api.StatusWaiting:
			in.Status = api.StatusPaused
		}
		return nil
	})
	if err == nil {
		e.mu.Lock()
		e.syncTimer(wfName, id)
		e.mu.Unlock()
	}
	return in, err
}

// Resume: paused → queued (replays from the top when a slot is free); waitingForPause →
// running (the pause is cancelled). Other states: no effect.
func (e *Engine) Resume(wfName, id string) (*api.Instance, error) {
	requeue := false
	in, err := e.mutate(wfName, id, func(_ *bolt.Tx, in *api.Instance) error {
		requeue = false
		switch in.Status {
		case api.StatusPaused:
			in.Status, requeue = api.StatusQueued, true
		case api.StatusWaitingForPause:
			in.Status = api.StatusRunning
		}
		return nil
	})
	if err == nil && requeue {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.requeue(wfName, id, in.Seq)
	}
	return in, err
}

// requeue makes an instance ready again, or once its run in flight has ended. Called
// with mu held.
func (e *Engine) requeue(wfName, id string, seq uint64) {
	w := e.wfs[wfName]
	if w.inflight[id] {
		w.pendingWake[id] = true
		return
	}
	e.pushReady(w, id, 0, seq)
	e.pump(wfName)
}

// Terminate ends an instance; no step or retry starts after it. With no step.do attempt
// in flight it is terminated at once. Otherwise the call only records the request
// (TerminateRequested; the status stays): each attempt in flight runs to its end (its
// timeout at the latest) and its result is committed, and the instance becomes
// terminated when its run has ended. Errors: 409 instance.cannot_terminate on complete,
// errored or terminated instances (the status does not change).
func (e *Engine) Terminate(wfName, id string) (*api.Instance, error) {
	if _, err := e.wf(wfName); err != nil {
		return nil, err
	}
	// The run lock is held through the commit: no attempt starts meanwhile that this
	// decision would not see.
	m, unlock := e.lockRun(wfName, id)
	defer unlock()
	e.mu.Lock()
	inFlight := e.wfs[wfName].inflight[id] && m.inFlight("")
	e.mu.Unlock()
	in, err := e.mutate(wfName, id, func(_ *bolt.Tx, in *api.Instance) error {
		if api.Finite(in.Status) {
			return api.Errorf(409, "instance.cannot_terminate", "(instance.cannot_terminate) Cannot terminate instance %q: it is %s, a finite state", id, in.Status)
		}
		if inFlight {
			if in.TerminateRequested == 0 {
				in.TerminateRequested = nowMs()
			}
			in.WakeAt, in.WaitType = 0, ""
			return nil
		}
		terminate(in, nowMs())
		return nil
	})
	if err == nil {
		e.mu.Lock()
		e.syncTimer(wfName, id)
		e.mu.Unlock()
	}
	return in, err
}

// terminate makes in terminated at now.
func terminate(in *api.Instance, now int64) {
	in.Status, in.Ended, in.TerminateRequested = api.StatusTerminated, now, 0
	in.WakeAt, in.WaitType = 0, ""
}

// Restart erases the instance's steps and events and runs it again from the start
// with the same id and params (any state).
func (e *Engine) Restart(wfName, id string) (*api.Instance, error) {
	if _, err := e.wf(wfName); err != nil {
		return nil, err
	}
	m, unlock := e.lockRun(wfName, id)
	in, err := e.mutate(wfName, id, func(tx *bolt.Tx, in *api.Instance) error {
		if err := store.DeleteInstance(tx, wfName, id, false); err != nil {
			return err
		}
		in.Status, in.Output, in.Error, in.Ended, in.Steps = api.StatusQueued, nil, nil, 0, 0
		in.TerminateRequested = 0
		in.RunID++
		in.WakeAt, in.WaitType = 0, ""
		return nil
	})
	if err == nil {
		m.forget()
	}
	unlock()
	if err == nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.syncTimer(wfName, id)
		e.requeue(wfName, id, in.Seq)
	}
	return in, err
}

// Delete removes an instance and its state; a run in flight is aborted at its next step
// (no rollbacks). Errors: 404.
func (e *Engine) Delete(wfName, id string) error {
	if _, err := e.wf(wfName); err != nil {
		return err
	}
	m, unlock := e.lockRun(wfName, id)
	err := e.commit(func(tx *bolt.Tx) error {
		if _, err := store.GetInstance(tx, wfName, id); err != nil {
			return notFound(id)
		}
		return store.DeleteInstance(tx, wfName, id, true)
	})
	if err == nil {
		m.forget()
	}
	unlock()
	if err == nil {
		e.mu.Lock()
		e.syncTimer(wfName, id)
		e.mu.Unlock()
	}
	return err
}

// SendEvent stores an event for the instance (FIFO per type) and wakes it when it waits
// for that type. Errors: invalid type (400 workflow.invalid_event_type), payload over
// 1 MiB (400), instance complete/errored/terminated (409), unknown instance (404).
func (e *Engine) SendEvent(wfName, id, typ string, payload json.RawMessage) error {
	if err := e.checkName("event type", typ, limits.WorkflowEventTypeChars); err != nil {
		return api.Errorf(400, "workflow.invalid_event_type", "(workflow.invalid_event_type) %v", err)
	}
	if err := e.checkPayload("event payload", payload); err != nil {
		return api.Errorf(400, "event.payload_too_large", "%v", err)
	}
	wake := false
	_, err := e.mutate(wfName, id, func(tx *bolt.Tx, in *api.Instance) error {
		if api.Finite(in.Status) {
			return api.Errorf(409, "instance.cannot_send_event", "Cannot send event %q to instance %q: it is %s", typ, id, in.Status)
		}
		b, err := store.EventBucket(tx, wfName, id, true)
		if err != nil {
			return err
		}
		ev := store.Event{Seq: store.NextSeq(tx, "event-seq"), Type: typ, Payload: payload, Timestamp: nowMs()}
		v, _ := json.Marshal(ev)
		if err := b.Put(store.U64(ev.Seq), v); err != nil {
			return err
		}
		wake = in.Status == api.StatusWaiting && in.WaitType == typ
		return nil
	})
	if err == nil && wake {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.wake(wfName, id)
	}
	return err
}

// List pages through a workflow's instances in id order, optionally only those with
// status; limit 1..1000 (50 when 0); cursor is the previous page's Cursor. A page also
// ends before the instance that would take its answer over MaxResponseBytes.
func (e *Engine) List(wfName, status string, limit int, cursor string) (*api.ListPage, error) {
	if _, err := e.wf(wfName); err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = 50
	}
	if limit < 0 || limit > 1000 {
		return nil, api.Errorf(400, "list.invalid_limit", "limit %d: want 1 to 1000", limit)
	}
	if status != "" {
		ok := false
		for _, s := range api.Statuses {
			ok = ok || s == status
		}
		if !ok {
			return nil, api.Errorf(400, "list.invalid_status", "status %q: want one of %s", status, strings.Join(api.Statuses, ", "))
		}
	}
	page := &api.ListPage{Instances: []*api.Instance{}}
	prefix := store.Key(wfName, "")
	err := e.db.View(func(tx *bolt.Tx) error {
		c := store.Instances(tx).Cursor()
		start := prefix
		if cursor != "" {
			start = append(store.Key(wfName, cursor), 0)
		}
		size := 0 // the stored records' JSON, at least what the answer takes
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var in api.Instance
			if err := json.Unmarshal(v, &in); err != nil {
				return err
			}
			if status != "" && in.Status != status {
				continue
			}
			if n := len(page.Instances); n == limit || (n > 0 && size+len(v)+1 > MaxResponseBytes-envelope) {
				page.Cursor = page.Instances[n-1].ID
				return nil
			}
			size += len(v) + 1
			page.Instances = append(page.Instances, &in)
		}
		return nil
	})
	return page, err
}

// Stats counts a workflow's instances by status.
func (e *Engine) Stats(wfName string) (*api.Stats, error) {
	e.mu.Lock()
	w, err := e.wf(wfName)
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	s := &api.Stats{Counts: map[string]int{}, Inflight: len(w.inflight), MaxInflight: w.maxInflight, Concurrency: w.cfg.Concurrency, Steps: w.cfg.Steps}
	e.mu.Unlock()
	prefix := store.Key(wfName, "")
	err = e.db.View(func(tx *bolt.Tx) error {
		c := store.Instances(tx).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var in api.Instance
			if err := json.Unmarshal(v, &in); err != nil {
				return err
			}
			s.Counts[in.Status]++
		}
		return nil
	})
	return s, err
}
