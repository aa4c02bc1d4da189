package cronschedule

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// aheadDispatcher is a dispatcher of namespace ns claiming ahead (10 s, the default),
// with its dispatch record there.
func (f *fleet) aheadDispatcher(clock *fakeClock, ns string) *Dispatcher {
	return NewDispatcher(f.c, DispatcherOptions{Now: clock.Now, TriggerPort: f.port, Identity: "test", Namespace: ns,
		DispatchRecord: types.NamespacedName{Namespace: ns, Name: "cron-dispatch"}})
}

func (f *fleet) record(t *testing.T, ns string) dispatchRecord {
	t.Helper()
	var lease coordinationv1.Lease
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "cron-dispatch"}, &lease); err != nil {
		t.Fatal(err)
	}
	rec := dispatchRecord{}
	if err := json.Unmarshal([]byte(lease.Annotations[DispatchRecordAnnotation]), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// aheadCase creates namespace ns with one CronSchedule of expr, and returns it, its
// first slot, a fake clock and a dispatcher claiming ahead there.
func (f *fleet) aheadCase(t *testing.T, ns, expr string) (*fleetv1alpha1.CronSchedule, time.Time, *fakeClock, *Dispatcher) {
	t.Helper()
	f.namespace(t, ns)
	cs := f.cronSchedule(t, ns, "c", workerSpec(expr))
	clock := &fakeClock{}
	return cs, firstSlotAfterCreation(t, cs, expr), clock, f.aheadDispatcher(clock, ns)
}

func runOnce(t *testing.T, ds ...*Dispatcher) {
	t.Helper()
	for _, d := range ds {
		if _, err := d.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func wait(ds ...*Dispatcher) {
	for _, d := range ds {
		d.Wait()
	}
}

// testClaimAhead: slots claimed ahead are dispatched exactly once whether their
// dispatcher confirms them, dies before the slot, or runs beside another one (issue 8
// "done" 4 with claim-ahead; docs/cron.md). It shares TestDispatcher's fleet.
func testClaimAhead(t *testing.T, f *fleet) {
	ctx := context.Background()

	t.Run("claimed ahead, confirmed and dispatched at the slot", func(t *testing.T) {
		const expr = "31 * * * *"
		cs, slot, clock, a := f.aheadCase(t, "ahead-confirmed", expr)
		clock.Set(slot.Add(-5 * time.Second))
		next, err := a.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := slot.Add(time.Hour); !next.Equal(want) {
			t.Errorf("next slot to claim = %s, want %s (the upcoming one is claimed)", next, want)
		}
		st := f.get(t, cs).Status.Schedules
		if len(st) != 1 || !st[0].LastScheduleTime.Time.Equal(slot) || st[0].ClaimedAheadBy != a.identity() {
			t.Fatalf("status.schedules = %+v, want slot %s claimed ahead by %s", st, slot, a.identity())
		}
		if got := f.calls(t, expr); len(got) != 0 {
			t.Fatalf("scheduled() called before the slot: %v", got)
		}
		if p := a.earliestPending(); !p.Equal(slot) {
			t.Fatalf("earliest pending claim %s, want %s", p, slot)
		}
		clock.Set(slot.Add(50 * time.Millisecond))
		runOnce(t, a)
		wait(a)
		if got, want := f.calls(t, expr), rfc(slot); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v", got, want)
		}
		if e := f.record(t, "ahead-confirmed")[a.identity()]; !e.Through.Equal(slot) || e.Fenced {
			t.Fatalf("dispatch record entry %+v, want through %s", e, slot)
		}
		if h := f.get(t, cs).Status.History; len(h) != 1 || h[0].Outcome != fleetv1alpha1.CronOutcomeOK {
			t.Fatalf("history %+v, want one ok", h)
		}
		// A new leader does not dispatch a confirmed slot again.
		b := f.aheadDispatcher(clock, "ahead-confirmed")
		clock.Set(slot.Add(20 * time.Second))
		runOnce(t, b)
		wait(b)
		if got := f.calls(t, expr); len(got) != 1 {
			t.Fatalf("scheduled() calls %v after a new leader took over, want the one", got)
		}
		if e := f.record(t, "ahead-confirmed")[a.identity()]; !e.Fenced {
			t.Fatalf("old dispatcher's entry %+v not fenced by the new one", e)
		}
	})

	t.Run("dispatcher gone before the slot: the new leader dispatches it late", func(t *testing.T) {
		const expr = "32 * * * *"
		cs, slot, clock, a := f.aheadCase(t, "ahead-lost", expr)
		clock.Set(slot.Add(-5 * time.Second))
		runOnce(t, a) // claims ahead, then "dies"
		b := f.aheadDispatcher(clock, "ahead-lost")
		clock.Set(slot.Add(15 * time.Second))
		runOnce(t, b)
		wait(b)
		if got, want := f.calls(t, expr), rfc(slot); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v", got, want)
		}
		if st := f.get(t, cs).Status.Schedules; len(st) != 1 || st[0].ClaimedAheadBy != "" || !st[0].LastScheduleTime.Time.Equal(slot) {
			t.Fatalf("status.schedules = %+v, want the slot claimed again as due", st)
		}
		// The old one was only paused: it is fenced and cannot dispatch it too.
		clock.Set(slot.Add(16 * time.Second))
		runOnce(t, a)
		wait(a)
		if got := f.calls(t, expr); len(got) != 1 {
			t.Fatalf("scheduled() calls %v, want exactly one", got)
		}
	})

	t.Run("new leader takes over a claim ahead before the slot", func(t *testing.T) {
		const expr = "33 * * * *"
		cs, slot, clock, a := f.aheadCase(t, "ahead-takeover", expr)
		clock.Set(slot.Add(-8 * time.Second))
		runOnce(t, a)
		b := f.aheadDispatcher(clock, "ahead-takeover")
		clock.Set(slot.Add(-3 * time.Second))
		runOnce(t, b)
		if st := f.get(t, cs).Status.Schedules; len(st) != 1 || st[0].ClaimedAheadBy != b.identity() {
			t.Fatalf("status.schedules = %+v, want the claim taken over by %s", st, b.identity())
		}
		clock.Set(slot.Add(50 * time.Millisecond))
		runOnce(t, a, b) // a: fenced, drops its claim; b: dispatches
		wait(a, b)
		if got, want := f.calls(t, expr), rfc(slot); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v", got, want)
		}
	})

	// Without its record (here: a namespace that does not exist; in a cluster, say,
	// RBAC) the dispatcher keeps firing, claiming each slot as it comes due.
	t.Run("record unavailable: slots claimed as they come due", func(t *testing.T) {
		const expr = "34 * * * *"
		cs, slot, clock, _ := f.aheadCase(t, "ahead-norecord", expr)
		d := NewDispatcher(f.c, DispatcherOptions{Now: clock.Now, TriggerPort: f.port, Identity: "test", Namespace: "ahead-norecord",
			DispatchRecord: types.NamespacedName{Namespace: "no-such-namespace", Name: "cron-dispatch"}})
		clock.Set(slot.Add(-5 * time.Second))
		runOnce(t, d)
		if st := f.get(t, cs).Status.Schedules; len(st) != 0 && st[0].LastScheduleTime != nil {
			t.Fatalf("status.schedules = %+v: claimed ahead without a record", st)
		}
		clock.Set(slot.Add(50 * time.Millisecond))
		runOnce(t, d)
		wait(d)
		if got, want := f.calls(t, expr), rfc(slot); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v", got, want)
		}
	})

	// The record deleted between the claim and the slot: the claim stays (the confirm
	// either fails and the next pass registers again under the same identity, or
	// recreates the Lease), and the slot runs once.
	t.Run("record deleted after the claim", func(t *testing.T) {
		const ns, expr = "ahead-deleted", "35 * * * *"
		_, slot, clock, a := f.aheadCase(t, ns, expr)
		clock.Set(slot.Add(-5 * time.Second))
		runOnce(t, a)
		if err := f.c.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cron-dispatch"}}); err != nil {
			t.Fatal(err)
		}
		clock.Set(slot.Add(50 * time.Millisecond))
		_, _ = a.RunOnce(ctx) // the confirm may fail (or, Leases allowing create on update, recreate the record)
		clock.Set(slot.Add(time.Second))
		runOnce(t, a)
		wait(a)
		if got, want := f.calls(t, expr), rfc(slot); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v", got, want)
		}
	})

	// A CronSchedule deleted and recreated under the same name between its claim and
	// the slot: the old claim is not dispatched for the new object, which runs once.
	t.Run("recreated under the same name", func(t *testing.T) {
		const ns, expr = "ahead-recreated", "36 * * * *"
		cs, slot, clock, a := f.aheadCase(t, ns, expr)
		clock.Set(slot.Add(-5 * time.Second))
		runOnce(t, a)
		if err := f.c.Delete(ctx, cs); err != nil {
			t.Fatal(err)
		}
		f.cronSchedule(t, ns, "c", workerSpec(expr))
		clock.Set(slot.Add(-3 * time.Second))
		runOnce(t, a)
		clock.Set(slot.Add(50 * time.Millisecond))
		runOnce(t, a)
		wait(a)
		if got, want := f.calls(t, expr), rfc(slot); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v (once)", got, want)
		}
	})

	// The runs of one wave for one Worker go in one POST /scheduled-batch to its pod
	// (the real trigger shim); each is recorded with its own outcome, and a run past
	// the wall-time limit is recorded as exceededWallTime while the others are ok.
	t.Run("one request per pod for a wave", func(t *testing.T) {
		const ns = "ahead-batch"
		f.namespace(t, ns)
		// Created during minute 45, the next "45" slot is in the next hour but the next
		// "46" one in this hour: wait for minute 46 (at most a minute, real time).
		for time.Now().UTC().Minute() == 45 {
			time.Sleep(time.Second)
		}
		specs := map[string]string{"throws": "45 * * * *", "ok-a": "45 0-23 * * *", "ok-b": "45 */1 * * *",
			"slow": "46 * * * *", "quick": "46 0-23 * * *"}
		css := map[string]*fleetv1alpha1.CronSchedule{}
		for name, expr := range specs {
			css[name] = f.cronSchedule(t, ns, name, workerSpec(expr))
		}
		slot45 := firstSlotAfterCreation(t, css["throws"], "45 * * * *")
		slot46 := slot45.Add(time.Minute)
		if s := firstSlotAfterCreation(t, css["slow"], "46 * * * *"); !s.Equal(slot46) {
			t.Fatalf("first slots %s and %s are not a minute apart", slot45, s)
		}
		paths := &pathRecorder{next: triggerTransport()}
		clock := &fakeClock{}
		d := NewDispatcher(f.c, DispatcherOptions{Now: clock.Now, TriggerPort: f.port, Identity: "test", Namespace: ns,
			WallTime: 2 * time.Second, HTTPClient: &http.Client{Transport: paths},
			DispatchRecord: types.NamespacedName{Namespace: ns, Name: "cron-dispatch"}})
		for _, slot := range []time.Time{slot45, slot46} {
			clock.Set(slot.Add(-5 * time.Second))
			runOnce(t, d)
			clock.Set(slot.Add(50 * time.Millisecond))
			runOnce(t, d)
			wait(d)
		}
		if got, want := strings.Join(paths.list(), " "), "/scheduled-batch /scheduled-batch"; got != want {
			t.Errorf("trigger requests %q, want %q (one per wave)", got, want)
		}
		want := map[string]struct {
			slot    time.Time
			outcome fleetv1alpha1.CronOutcome
			message string
		}{
			"throws": {slot45, fleetv1alpha1.CronOutcomeException, "pod app-0"},
			"ok-a":   {slot45, fleetv1alpha1.CronOutcomeOK, "pod app-0"},
			"ok-b":   {slot45, fleetv1alpha1.CronOutcomeOK, "pod app-0"},
			"slow":   {slot46, fleetv1alpha1.CronOutcomeExceededWallTime, "wall-time limit"},
			"quick":  {slot46, fleetv1alpha1.CronOutcomeOK, "pod app-0"},
		}
		for name, w := range want {
			h := f.get(t, css[name]).Status.History
			if len(h) != 1 || !h[0].ScheduledTime.Time.Equal(w.slot) || h[0].Outcome != w.outcome || !strings.Contains(h[0].Message, w.message) {
				t.Errorf("%s: history %+v, want one %s row at %s mentioning %q", name, h, w.outcome, w.slot, w.message)
			}
			if got := f.calls(t, specs[name]); len(got) != 1 {
				t.Errorf("%s: scheduled() calls %v, want one", name, got)
			}
		}
	})

	// Two dispatchers running passes at the same instants (a stale leader beside a new
	// one, at its worst: they keep fencing each other): every slot still runs once.
	t.Run("two dispatchers claiming ahead at once", func(t *testing.T) {
		const expr = "1-59/2 * * * *"
		f.namespace(t, "ahead-race")
		cs := f.cronSchedule(t, "ahead-race", "c", workerSpec(expr))
		t0 := firstSlotAfterCreation(t, cs, expr)
		clock := &fakeClock{}
		a, b := f.aheadDispatcher(clock, "ahead-race"), f.aheadDispatcher(clock, "ahead-race")
		var slots []time.Time
		for i := 0; i < 4; i++ {
			slot := t0.Add(time.Duration(2*i) * time.Minute)
			slots = append(slots, slot)
			for _, at := range []time.Duration{-9 * time.Second, -2 * time.Second, 20 * time.Millisecond, 3 * time.Second} {
				clock.Set(slot.Add(at))
				runTogether(t, a, b)
			}
		}
		clock.Set(slots[len(slots)-1].Add(30 * time.Second))
		runOnce(t, a, b, a)
		wait(a, b)
		if got, want := f.calls(t, expr), rfc(slots...); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want each slot once: %v", got, want)
		}
	})
}

// pathRecorder is a transport that records the request paths.
type pathRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	paths []string
}

func (p *pathRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.paths = append(p.paths, req.URL.Path)
	p.mu.Unlock()
	return p.next.RoundTrip(req)
}

func (p *pathRecorder) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.paths...)
}
