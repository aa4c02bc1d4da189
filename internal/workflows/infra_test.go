package workflows_test

import (
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// A step attempt that fails for an infrastructure reason (a lost connection, as while
// the pods behind a call are replaced) runs again under the same attempt number: a step
// with no retries completes, and its record shows one attempt.
func TestInfrastructureFailuresDoNotConsumeRetries(t *testing.T) {
	h := newHarness(t, 0.1, wfDef{api.WorkflowConfig{Name: "infra"}, "Infra", "INFRA"})
	h.create("infra", "rollout", map[string]any{})
	in := h.waitStatus("infra", "rollout", api.StatusComplete, api.StatusErrored)
	if in.Status != api.StatusComplete || string(in.Output) != `{"runs":3,"attempt":1}` {
		t.Fatalf("status %s output %s error %+v", in.Status, in.Output, in.Error)
	}
	s := h.step("infra", "rollout", "do", "through a rollout", 1)
	if s == nil || len(s.Attempts) != 1 || s.Attempts[0].Error != nil {
		t.Fatalf("step record %+v: want one successful attempt", s)
	}
	if n := len(h.counter.times("rollout:runs")); n != 3 {
		t.Errorf("the callback ran %d times, want 3", n)
	}
}
