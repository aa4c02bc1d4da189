package workflows_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// pause() while several step.do calls are in flight at once: the instance pauses only
// after every one of them settled, each result is committed, and on resume no completed
// step runs again (each callback's side effect happens once).
func TestPauseWaitsForConcurrentSteps(t *testing.T) {
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "parallel"}, "Parallel", "PARALLEL"})
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			id := fmt.Sprintf("par%d", n)
			h.create("parallel", id, map[string]any{"n": n, "slowMs": 800, "staggerMs": 300})
			h.waitFor("every step to start", 30*time.Second, func() bool {
				for i := range n {
					if len(h.counter.times(fmt.Sprintf("%s:p%d", id, i))) == 0 {
						return false
					}
				}
				return true
			})
			if st := h.binding("PARALLEL", "pause", map[string]any{"id": id}, nil); st != 200 {
				t.Fatalf("pause: %d", st)
			}
			h.waitStatus("parallel", id, api.StatusPaused)
			for i := range n {
				if s := h.step("parallel", id, "do", fmt.Sprintf("p%d", i), 1); s == nil || !s.Done || string(s.Result) != "1" {
					t.Errorf("step p%d after the pause: %+v, want committed with result 1", i, s)
				}
			}
			if c := len(h.counter.times(id + ":after")); c != 0 {
				t.Errorf("the step after the concurrent ones ran %d times while paused", c)
			}
			if st := h.binding("PARALLEL", "resume", map[string]any{"id": id}, nil); st != 200 {
				t.Fatalf("resume: %d", st)
			}
			in := h.waitStatus("parallel", id, api.StatusComplete, api.StatusErrored)
			var out struct {
				Got   []int
				After int
			}
			if err := json.Unmarshal(in.Output, &out); err != nil || len(out.Got) != n || out.After != 1 {
				t.Fatalf("output %s (status %s, error %+v)", in.Output, in.Status, in.Error)
			}
			for i := range n {
				if c := len(h.counter.times(fmt.Sprintf("%s:p%d", id, i))); c != 1 || out.Got[i] != 1 {
					t.Errorf("step p%d ran %d times (result %d), want once", i, c, out.Got[i])
				}
			}
		})
	}
}
