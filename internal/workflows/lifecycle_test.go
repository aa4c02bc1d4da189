package workflows_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Done-means 4: three events sent before the first wait are received in order by three
// waits; a wait that timed out (caught) does not swallow the next event.
func TestEvents(t *testing.T) {
	h := newHarness(t, 0.1, wfDef{api.WorkflowConfig{Name: "events"}, "Events", "EVENTS"})
	t.Run("buffered FIFO", func(t *testing.T) {
		h.create("events", "buffered", map[string]any{"mode": "buffered"})
		h.waitFor("the start wait", 30*time.Second, func() bool { return h.get("events", "buffered").WaitType == "start" })
		for i := 1; i <= 3; i++ {
			if st := h.api("POST", "/workflows/events/instances/buffered/events", map[string]any{"type": "approve", "payload": fmt.Sprintf("approval-%d", i)}, nil); st != 200 {
				t.Fatalf("sendEvent %d: %d", i, st)
			}
		}
		h.api("POST", "/workflows/events/instances/buffered/events", map[string]any{"type": "start"}, nil)
		in := h.waitStatus("events", "buffered", api.StatusComplete, api.StatusErrored)
		if got := string(in.Output); got != `["approval-1","approval-2","approval-3"]` {
			t.Fatalf("output %s (status %s, error %+v)", got, in.Status, in.Error)
		}
	})
	t.Run("timed-out wait does not swallow the next event", func(t *testing.T) {
		h.create("events", "late", map[string]any{"mode": "timeout"})
		h.waitFor("the first wait to time out", 30*time.Second, func() bool {
			s := h.step("events", "late", "waitForEvent", "early", 1)
			return s != nil && s.Done
		})
		h.waitFor("the second wait", 30*time.Second, func() bool {
			return h.step("events", "late", "waitForEvent", "later", 1) != nil
		})
		h.api("POST", "/workflows/events/instances/late/events", map[string]any{"type": "late", "payload": "the event"}, nil)
		in := h.waitStatus("events", "late", api.StatusComplete, api.StatusErrored)
		if got := string(in.Output); got != `["Error","the event"]` {
			t.Fatalf("output %s (status %s, error %+v)", got, in.Status, in.Error)
		}
	})
	// A wait whose timeout has passed throws its timeout error even when an event of its
	// type arrived before the instance ran again (here while workerd was down); the event
	// belongs to the next wait. A wait receives the events sent before its deadline:
	// https://developers.cloudflare.com/workflows/build/events-and-parameters/#wait-for-events
	t.Run("an event after the deadline goes to the next wait", func(t *testing.T) {
		h.create("events", "after-deadline", map[string]any{"mode": "timeout", "earlyTimeout": "30 seconds"})
		h.waitFor("the first wait", 30*time.Second, func() bool { return h.get("events", "after-deadline").WaitType == "late" })
		h.mu.Lock()
		h.workerd.kill()
		h.mu.Unlock()
		early := h.step("events", "after-deadline", "waitForEvent", "early", 1)
		if early == nil || early.Done {
			t.Fatalf("the first wait ended before workerd stopped (%+v): its timeout is too short for this test", early)
		}
		h.waitFor("the first wait's deadline", 30*time.Second, func() bool { return time.Now().UnixMilli() > early.WakeAt })
		if st := h.api("POST", "/workflows/events/instances/after-deadline/events", map[string]any{"type": "late", "payload": "the event"}, nil); st != 200 {
			t.Fatalf("sendEvent: %d", st)
		}
		h.startWorkerd()
		in := h.waitStatus("events", "after-deadline", api.StatusComplete, api.StatusErrored)
		if got := string(in.Output); got != `["Error","the event"]` {
			t.Fatalf("output %s (status %s, error %+v)", got, in.Status, in.Error)
		}
	})
	t.Run("invalid event type", func(t *testing.T) {
		var out struct{ Error api.APIError }
		st := h.api("POST", "/workflows/events/instances/late/events", map[string]any{"type": "a.b"}, &out)
		if st != 400 || out.Error.Code != "workflow.invalid_event_type" || !strings.Contains(out.Error.Message, "workflow_event_type_chars") {
			t.Fatalf("sendEvent type a.b: %d %+v", st, out.Error)
		}
	})
}

// Done-means 6: limits.steps: 2 -> do, sleep, do completes; do, do, do errors with the
// step-limit message.
func TestStepLimit(t *testing.T) {
	h := newHarness(t, 0.1, wfDef{api.WorkflowConfig{Name: "limited", Steps: 2}, "Limited", "LIMITED"})
	cases := []struct {
		id     string
		shape  []string
		status string
		msg    string
	}{
		{"do-sleep-do", []string{"do", "sleep", "do"}, api.StatusComplete, ""},
		{"do-do-do", []string{"do", "do", "do"}, api.StatusErrored, "The limit of 2 steps has been reached. This limit can be changed in your worker configuration."},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			h.create("limited", tc.id, map[string]any{"shape": tc.shape})
			in := h.waitStatus("limited", tc.id, api.StatusComplete, api.StatusErrored)
			if in.Status != tc.status {
				t.Fatalf("status %s (error %+v), want %s", in.Status, in.Error, tc.status)
			}
			if tc.msg != "" && (in.Error == nil || !strings.HasPrefix(in.Error.Message, tc.msg) || !strings.Contains(in.Error.Message, "workflow_steps")) {
				t.Fatalf("error %+v, want %q naming the limit", in.Error, tc.msg)
			}
		})
	}
}

// Done-means 5: pause during a slow step -> waitingForPause -> paused after the step; the
// step's side effect happens once; resume continues; terminate on a complete instance
// fails with a clear error and the status stays complete.
func TestPauseResumeTerminate(t *testing.T) {
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "pausable"}, "Pausable", "PAUSABLE"})
	h.create("pausable", "p1", map[string]any{"slowMs": 3000})
	h.waitFor("the slow step to start", 30*time.Second, func() bool { return len(h.counter.times("p1:slow")) == 1 })
	if st := h.binding("PAUSABLE", "pause", map[string]any{"id": "p1"}, nil); st != 200 {
		t.Fatalf("pause: %d", st)
	}
	if in := h.get("pausable", "p1"); in.Status != api.StatusWaitingForPause {
		t.Fatalf("status during the step after pause() = %s, want waitingForPause", in.Status)
	}
	h.waitStatus("pausable", "p1", api.StatusPaused)
	if s := h.step("pausable", "p1", "do", "slow", 1); s == nil || !s.Done || string(s.Result) != "1" {
		t.Fatalf("slow step after pause: %+v", s)
	}
	if n := len(h.counter.times("p1:quick")); n != 0 {
		t.Fatalf("quick step ran %d times while paused", n)
	}
	if st := h.binding("PAUSABLE", "resume", map[string]any{"id": "p1"}, nil); st != 200 {
		t.Fatalf("resume: %d", st)
	}
	in := h.waitStatus("pausable", "p1", api.StatusComplete, api.StatusErrored)
	if string(in.Output) != `{"slow":1,"quick":1}` {
		t.Fatalf("output %s (status %s, error %+v)", in.Output, in.Status, in.Error)
	}
	if n := len(h.counter.times("p1:slow")); n != 1 {
		t.Fatalf("slow step's side effect ran %d times, want 1", n)
	}
	var out struct {
		Error struct{ Name, Code, Message string }
	}
	if st := h.binding("PAUSABLE", "terminate", map[string]any{"id": "p1"}, &out); st != 400 || out.Error.Code != "instance.cannot_terminate" || !strings.Contains(out.Error.Message, "complete") {
		t.Fatalf("terminate on complete: %d %+v", st, out)
	}
	if in := h.get("pausable", "p1"); in.Status != api.StatusComplete {
		t.Fatalf("status after a refused terminate = %s", in.Status)
	}
	// terminate during the slow step: the instance stays running until the step in flight
	// has settled and is committed, then it is terminated; the next step never runs.
	h.create("pausable", "p2", map[string]any{"slowMs": 1500})
	h.waitFor("p2's slow step", 30*time.Second, func() bool { return len(h.counter.times("p2:slow")) == 1 })
	if st := h.binding("PAUSABLE", "terminate", map[string]any{"id": "p2"}, nil); st != 200 {
		t.Fatalf("terminate: %d", st)
	}
	if in := h.get("pausable", "p2"); in.Status != api.StatusRunning || in.TerminateRequested == 0 {
		t.Fatalf("status after terminate with a step in flight = %s (terminate requested at %d), want running", in.Status, in.TerminateRequested)
	}
	h.waitStatus("pausable", "p2", api.StatusTerminated)
	if s := h.step("pausable", "p2", "do", "slow", 1); s == nil || !s.Done || string(s.Result) != "1" {
		t.Fatalf("the slow step in flight at terminate is not committed: %+v", s)
	}
	time.Sleep(500 * time.Millisecond) // the run's next call comes right after the commit
	if n := len(h.counter.times("p2:quick")); n != 0 {
		t.Fatalf("terminated instance ran its next step %d times", n)
	}
}

// Done-means 8: concurrency.limit 5 with 50 instances: never more than 5 running, sleeping
// instances free their slot, queued ones start oldest first.
func TestConcurrencyLimit(t *testing.T) {
	const n, limit = 50, 5
	h := newHarness(t, 0.1, wfDef{api.WorkflowConfig{Name: "sleepy", Concurrency: limit}, "Sleepy", "SLEEPY"})
	var batch []map[string]any
	for i := 0; i < n; i++ {
		batch = append(batch, map[string]any{"id": fmt.Sprintf("c%02d", i)})
	}
	var res struct{ Created []map[string]any }
	if st := h.api("POST", "/workflows/sleepy/batch", map[string]any{"instances": batch}, &res); st != 200 || len(res.Created) != n {
		t.Fatalf("createBatch: %d, %d created", st, len(res.Created))
	}
	maxRunning := 0
	h.waitFor("all instances to complete", 120*time.Second, func() bool {
		var s api.Stats
		h.api("GET", "/workflows/sleepy/stats", nil, &s)
		maxRunning = max(maxRunning, s.Counts[api.StatusRunning]+s.Counts[api.StatusWaitingForPause])
		return s.Counts[api.StatusComplete] == n
	})
	var s api.Stats
	h.api("GET", "/workflows/sleepy/stats", nil, &s)
	if s.MaxInflight > limit || maxRunning > limit {
		t.Fatalf("max runs in flight %d, max running seen %d; limit %d", s.MaxInflight, maxRunning, limit)
	}
	var ins []api.Instance
	for i := 0; i < n; i++ {
		ins = append(ins, h.get("sleepy", fmt.Sprintf("c%02d", i)))
	}
	// Oldest first: the first dispatches follow creation order.
	order := make([]uint64, n)
	for i, in := range ins {
		order[i] = in.StartOrder
	}
	if !sort.SliceIsSorted(order, func(a, b int) bool { return order[a] < order[b] }) {
		t.Fatalf("first-dispatch order by creation: %v", order)
	}
	// Sleeping instances free their slot: instance #limit+1 started before #1 ended.
	if !(ins[limit].Started < ins[0].Ended) {
		t.Fatalf("instance %d started at %d, after instance 0 ended at %d: sleeping did not free a slot", limit, ins[limit].Started, ins[0].Ended)
	}
	_ = reflect.DeepEqual
}
