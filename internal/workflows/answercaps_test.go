package workflows

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// commitSteps commits n step.do results of size bytes each to instance id of workflow
// "w", whose run the runner holds.
func commitSteps(t *testing.T, e *Engine, id string, n, size int) {
	t.Helper()
	in, _ := e.Get("w", id)
	result, _ := json.Marshal(strings.Repeat("r", size-2))
	for i := range n {
		name := fmt.Sprintf("step-%02d", i)
		ans, err := e.Step(StepRequest{Kind: "do", Workflow: "w", ID: id, RunID: in.RunID, Name: name, N: 1})
		if err != nil || ans.Action != "run" {
			t.Fatalf("step.do %s: %+v %v, want run", name, ans, err)
		}
		ans, err = e.Attempt(AttemptReport{Workflow: "w", ID: id, RunID: in.RunID, Name: name, N: 1, Attempt: ans.Attempt, OK: true, Result: result})
		if err != nil || ans.Action != "cached" {
			t.Fatalf("attempt %s: %+v %v, want cached", name, ans, err)
		}
	}
}

// An instance's steps answer at most MaxResponseBytes a page: 8 results of 1 MB each (each
// under Cloudflare's step result limit, 1 MiB:
// https://developers.cloudflare.com/workflows/reference/limits/) come in pages that a
// cursor continues, every step once.
func TestStepsAnswerIsCapped(t *testing.T) {
	hold := make(chan struct{})
	e, runs := faultEngine(t, hold)
	t.Cleanup(func() { close(hold) })
	if _, err := e.Create("w", api.CreateOptions{ID: "big"}); err != nil {
		t.Fatal(err)
	}
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	size := int(limits.Get(limits.DefaultProfile, limits.WorkflowStepResultBytes)) - 48576 // 1,000,000 bytes
	commitSteps(t, e, "big", 8, size)
	h := e.Handler()
	seen, cursor, pages := map[string]bool{}, "", 0
	for {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/workflows/w/instances/big/steps?cursor="+cursor, nil))
		if rec.Code != 200 || rec.Body.Len() > MaxResponseBytes {
			t.Fatalf("page %d: %d, %d bytes; want 200 and at most %d bytes", pages, rec.Code, rec.Body.Len(), MaxResponseBytes)
		}
		var page struct {
			Steps  []api.Step `json:"steps"`
			Cursor string     `json:"cursor"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Steps {
			if seen[s.Name] || len(s.Result) != size {
				t.Fatalf("step %s again or with %d result bytes", s.Name, len(s.Result))
			}
			seen[s.Name] = true
		}
		pages++
		if cursor = page.Cursor; cursor == "" || pages > 8 {
			break
		}
	}
	if len(seen) != 8 || pages < 2 {
		t.Errorf("%d steps in %d pages, want 8 in at least 2", len(seen), pages)
	}
}

// The runner's messages are read up to the step result limit (what the run's output
// may take, as a step's result) plus the envelope: a larger outcome makes the instance
// errored with an error that names the limit, and the run is not dispatched again.
func TestRunnerAnswerIsCapped(t *testing.T) {
	var runs atomic.Int64
	out := strings.Repeat("o", 2<<20)
	runner := fakeRunner(t, func() string {
		runs.Add(1)
		return `{"op":"outcome","outcome":"complete","output":"` + out + `"}`
	})
	e, err := New(Options{DataDir: t.TempDir(), RunnerURL: runner.URL, DispatchRetry: 10 * time.Millisecond, Workflows: []api.WorkflowConfig{{Name: "w"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if _, err := e.Create("w", api.CreateOptions{ID: "huge"}); err != nil {
		t.Fatal(err)
	}
	var in *api.Instance
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if in, err = e.Get("w", "huge"); err == nil && api.Finite(in.Status) {
			break
		}
	}
	if in.Status != api.StatusErrored || in.Error == nil || !strings.Contains(in.Error.Message, "too large") ||
		!strings.Contains(in.Error.Message, string(limits.WorkflowStepResultBytes)) || len(in.Output) != 0 {
		t.Fatalf("instance %s, error %+v, %d output bytes; want errored naming %s", in.Status, in.Error, len(in.Output), limits.WorkflowStepResultBytes)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the run was dispatched %d times, want 1", n)
	}
}
