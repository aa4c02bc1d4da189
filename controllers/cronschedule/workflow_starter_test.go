package cronschedule

import (
	"regexp"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// Instance ids of cron firings follow the engine's id rule (docs/workflows.md: ≤ 100
// chars, ^[a-zA-Z0-9_][a-zA-Z0-9-_]*$), are the same for the same slot and differ
// between slots and between expressions.
func TestScheduledInstanceID(t *testing.T) {
	re := regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9-_]*$`)
	slot := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := ScheduledInstanceID("* * * * *", slot)
	for _, tc := range []struct {
		name string
		id   string
		same bool
	}{
		{"same slot", ScheduledInstanceID("* * * * *", slot.In(time.FixedZone("x", 3600))), true},
		{"next slot", ScheduledInstanceID("* * * * *", slot.Add(time.Minute)), false},
		{"other expression", ScheduledInstanceID("0 12 * * *", slot), false},
	} {
		if (tc.id == a) != tc.same {
			t.Errorf("%s: %s vs %s", tc.name, tc.id, a)
		}
		if !re.MatchString(tc.id) || int64(len(tc.id)) > limits.Get(limits.Paid, limits.WorkflowInstanceIDChars) {
			t.Errorf("%s: %q breaks the instance id rule", tc.name, tc.id)
		}
	}
}
