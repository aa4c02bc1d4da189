package workflows

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// errDiskFull stands for a commit the disk refuses (ENOSPC, EIO): bbolt rolls the
// transaction back and returns the error.
var errDiskFull = errors.New("write workflows.db: no space left on device")

// faultEngine is an engine whose commits number failAt (1-based, counted from New's
// return) fail. Its runner stands in for workerd's /run: it counts the calls, waits for
// hold to close (nil: at once) and sends the outcome "complete" with output 1.
func faultEngine(t *testing.T, hold chan struct{}, failAt ...int64) (e *Engine, runs *atomic.Int64) {
	t.Helper()
	runs = &atomic.Int64{}
	runner := fakeRunner(t, func() string {
		runs.Add(1)
		if hold != nil {
			<-hold
		}
		return `{"op":"outcome","outcome":"complete","output":1}`
	})
	e, err := New(Options{DataDir: t.TempDir(), RunnerURL: runner.URL, DispatchRetry: 10 * time.Millisecond,
		Workflows: []api.WorkflowConfig{{Name: "w"}}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	var n atomic.Int64
	var mu sync.Mutex
	fault := func() error {
		mu.Lock()
		defer mu.Unlock()
		k := n.Add(1)
		for _, f := range failAt {
			if k == f {
				return errDiskFull
			}
		}
		return nil
	}
	e.commitFault.Store(&fault)
	return e, runs
}

func waitComplete(t *testing.T, e *Engine, id string) *api.Instance {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		in, err := e.Get("w", id)
		if err == nil && in.Status == api.StatusComplete {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s: %+v %v, want complete", id, in, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A dispatch whose commit fails (the instance moving to running) keeps the instance
// queued for another dispatch instead of dropping it until the engine restarts.
func TestDispatchCommitFailureKeepsInstance(t *testing.T) {
	e, runs := faultEngine(t, nil, 2) // 1: create, 2: the dispatch
	if _, err := e.Create("w", api.CreateOptions{ID: "order-1"}); err != nil {
		t.Fatal(err)
	}
	waitComplete(t, e, "order-1")
	if n := runs.Load(); n != 1 {
		t.Errorf("the runner ran %d times, want 1 (the failed dispatch never reached it)", n)
	}
}

// A run whose outcome cannot be committed is not run again: the engine commits the
// outcome it has once the store accepts it, so the user's code does not re-run while
// the disk is full.
func TestOutcomeCommitFailureDoesNotRerun(t *testing.T) {
	e, runs := faultEngine(t, nil, 3, 4) // 1: create, 2: dispatch, 3 and 4: the outcome
	if _, err := e.Create("w", api.CreateOptions{ID: "order-1"}); err != nil {
		t.Fatal(err)
	}
	in := waitComplete(t, e, "order-1")
	if n := runs.Load(); n != 1 || string(in.Output) != "1" {
		t.Errorf("the runner ran %d times (output %s), want once (output 1)", n, in.Output)
	}
}

// A step attempt whose group commit fails is not acknowledged: the runner gets an
// error (and aborts the run; the replay reports the attempt again), and the store
// holds no trace of it.
func TestAttemptCommitFailureIsNotAcknowledged(t *testing.T) {
	hold := make(chan struct{})
	e, runs := faultEngine(t, hold)
	t.Cleanup(func() { close(hold) }) // before the runner closes (cleanups run last first)
	if _, err := e.Create("w", api.CreateOptions{ID: "order-1"}); err != nil {
		t.Fatal(err)
	}
	for runs.Load() == 0 { // the run is in the runner's hands
		time.Sleep(time.Millisecond)
	}
	in, _ := e.Get("w", "order-1")
	step := StepRequest{Kind: "do", Workflow: "w", ID: "order-1", RunID: in.RunID, Name: "charge", N: 1}
	ans, err := e.Step(step)
	if err != nil || ans.Action != "run" {
		t.Fatalf("step.do: %+v %v, want run", ans, err)
	}
	fault := func() error { return errDiskFull }
	e.commitFault.Store(&fault)
	rep := AttemptReport{Workflow: "w", ID: "order-1", RunID: in.RunID, Name: "charge", N: 1, Attempt: ans.Attempt, OK: true, Result: []byte(`{"charged":true}`)}
	if ans, err := e.Attempt(rep); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("attempt with a failing commit: %+v %v, want the commit's error", ans, err)
	}
	page, err := e.Steps("w", "order-1", "")
	if err != nil || len(page.Steps) != 0 {
		t.Fatalf("steps after a failed commit: %+v %v, want none", page, err)
	}
}

// While the runner or the store keeps failing, dispatches come ever less often: the
// pause doubles from Options.DispatchRetry per failure in a row, up to 30 s.
func TestDispatchDelayBacksOff(t *testing.T) {
	base := 200 * time.Millisecond
	for failures, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond} {
		if got := dispatchDelay(base, failures); got != want {
			t.Errorf("dispatchDelay(%s, %d) = %s, want %s", base, failures, got, want)
		}
	}
	if got := dispatchDelay(base, 1000); got != 30*time.Second {
		t.Errorf("dispatchDelay(%s, 1000) = %s, want the 30 s ceiling", base, got)
	}
}

// fakeRunner stands in for workerd's runner: it accepts each run's socket, reads the
// job, calls run (which may wait) and sends back the outcome message it returns.
func fakeRunner(t *testing.T, run func() string) *httptest.Server {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		if _, _, err := c.ReadMessage(); err != nil {
			return
		}
		_ = c.WriteMessage(websocket.TextMessage, []byte(run()))
		_, _, _ = c.ReadMessage() // until the engine closes
	}))
	t.Cleanup(srv.Close)
	return srv
}
