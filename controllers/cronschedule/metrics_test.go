package cronschedule

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// A deleted CronSchedule's dispatch series go with it; listed ones and those of other
// namespaces (another dispatcher's) stay.
func TestDeletedScheduleSeriesDropped(t *testing.T) {
	outcomes.Reset()
	defer outcomes.Reset()
	for _, k := range [][2]string{{"a", "kept"}, {"a", "gone"}, {"b", "other"}} {
		outcomes.WithLabelValues(k[0], k[1], "ok").Inc()
		outcomes.WithLabelValues(k[0], k[1], "exception").Inc()
	}
	d := &Dispatcher{opts: DispatcherOptions{Namespace: "a"}}
	d.forgetUnlisted([]fleetv1alpha1.CronSchedule{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "kept"}}})
	if n := testutil.CollectAndCount(outcomes); n != 4 {
		t.Fatalf("%d series after a/gone was deleted, want 4 (a/kept and b/other, two outcomes each)", n)
	}
	if v := testutil.ToFloat64(outcomes.WithLabelValues("a", "kept", "ok")); v != 1 {
		t.Fatalf("a/kept ok = %v, want 1", v)
	}
}
