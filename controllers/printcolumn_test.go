package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// tableCell is the cell of column of the object at path as the API server prints it
// for kubectl get (the server-side Table).
func tableCell(t *testing.T, path, column string) any {
	t.Helper()
	cfg := rest.CopyConfig(restCfg)
	cfg.GroupVersion = &fleetv1alpha1.GroupVersion
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(testenv.Scheme()).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := rc.Get().AbsPath(path).SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil || len(tbl.Rows) != 1 {
		t.Fatalf("table of %s: %v: %s", path, err, body)
	}
	for i, c := range tbl.ColumnDefinitions {
		if c.Name == column {
			return tbl.Rows[0].Cells[i]
		}
	}
	t.Fatalf("no column %q in %v", column, tbl.ColumnDefinitions)
	return nil
}

// The LAST column of kubectl get cronschedules is empty before the first run, though
// lastScheduleTime already holds a slot claimed ahead (in the future, which a date
// column prints as <invalid>), and shows the age of the newest recorded run after it.
func TestCronScheduleLastColumn(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	cs := &fleetv1alpha1.CronSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"},
		Spec: fleetv1alpha1.CronScheduleSpec{Schedules: []string{"0 0 1 1 *"}, Suspend: true,
			Target: fleetv1alpha1.CronTarget{WorkerRef: &fleetv1alpha1.LocalObjectReference{Name: "app"}}},
	}
	if err := k8sClient.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/apis/%s/namespaces/%s/cronschedules/later", fleetv1alpha1.GroupVersion, ns)
	setStatus := func(mutate func(*fleetv1alpha1.CronScheduleStatus)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cs), cs); err != nil {
				return err
			}
			mutate(&cs.Status)
			return k8sClient.Status().Update(ctx, cs)
		}); err != nil {
			t.Fatal(err)
		}
	}
	ahead := metav1.NewTime(time.Now().Add(8 * time.Second).Truncate(time.Second))
	setStatus(func(st *fleetv1alpha1.CronScheduleStatus) { st.LastScheduleTime = &ahead })
	if got := tableCell(t, path, "Last"); got != nil {
		t.Errorf("Last before the first run = %v, want empty", got)
	}
	ran := metav1.NewTime(time.Now().Add(-3 * time.Minute).Truncate(time.Second))
	setStatus(func(st *fleetv1alpha1.CronScheduleStatus) {
		st.History = []fleetv1alpha1.CronEvent{{Cron: "0 0 1 1 *", ScheduledTime: ran, Outcome: fleetv1alpha1.CronOutcomeOK}}
	})
	// A date column prints the age with apimachinery's HumanDuration at the moment the
	// server answers, which lies between these two readings (3m, or 3m1s on a slow run).
	before := duration.HumanDuration(time.Since(ran.Time))
	got := tableCell(t, path, "Last")
	after := duration.HumanDuration(time.Since(ran.Time))
	if got != before && got != after {
		t.Errorf("Last after a run 3 minutes ago = %v, want %s (or %s)", got, before, after)
	}
}
