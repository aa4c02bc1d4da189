package cronschedule

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/cron"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// fakeClock is the dispatcher's clock in tests: the API server and workerd are real,
// only "now" is moved to the slots instead of waiting for them.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) Now() time.Time  { return time.Unix(0, c.ns.Load()) }

// fleet is a real kube-apiserver (envtest) plus a real workerd serving the test
// worker's trigger socket on a loopback address (testenv.FreeLoopbackAddr).
type fleet struct {
	env      *envtest.Environment
	cfg      *rest.Config
	c        client.Client
	host     string // the trigger socket's address: the test pods' IP
	port     int
	triggerU string // the trigger socket
	userU    string // the user worker's socket: GET returns its call log
}

func startFleet(t testing.TB) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiserver, etcd and workerd")
	}
	env, err := testenv.NewEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	// a shared 2-core machine can take longer than envtest's default 20 s
	env.ControlPlaneStartTimeout = 3 * time.Minute
	env.ControlPlaneStopTimeout = time.Minute
	cfg, err := testenv.StartEnv(env)
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	addr := testenv.FreeLoopbackAddr(t)
	host, portS, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil {
		t.Fatal(err)
	}
	userAddr := testenv.FreeLoopbackAddr(t)
	dir, _ := filepath.Abs(filepath.Join("testdata", "worker"))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, testenv.WorkerdBinary(t), "serve", "--experimental",
		filepath.Join(dir, "config.capnp"), "--socket-addr=trigger="+addr, "--socket-addr=user="+userAddr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	f := &fleet{env: env, cfg: cfg, c: c, host: host, port: port, triggerU: "http://" + addr, userU: "http://" + userAddr}
	for i := 0; ; i++ {
		resp, err := http.Get(f.userU + "/calls")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i > 600 {
			t.Fatalf("workerd never answered on %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return f
}

type call struct {
	Cron          string `json:"cron"`
	ScheduledTime int64  `json:"scheduledTime"`
	At            int64  `json:"at"` // Date.now() when the handler started
}

func (f *fleet) allCalls(t testing.TB) []call {
	t.Helper()
	resp, err := http.Get(f.userU + "/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all []call
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		t.Fatal(err)
	}
	return all
}

// calls returns the scheduled() calls the user worker saw for one expression, as UTC
// RFC 3339 times.
func (f *fleet) calls(t *testing.T, cron string) []string {
	t.Helper()
	out := []string{}
	for _, c := range f.allCalls(t) {
		if c.Cron == cron {
			out = append(out, time.UnixMilli(c.ScheduledTime).UTC().Format(time.RFC3339))
		}
	}
	return out
}

// namespace creates a namespace holding one ready pod of Worker "app" at f.host
// (no kubelet in envtest: the test sets the pod's status itself).
func (f *fleet) namespace(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	if err := f.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app-0", Namespace: name, Labels: map[string]string{
			podcontract.LabelWorker: "app", podcontract.LabelComponent: podcontract.ComponentWorker}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "workerd", Image: "workerd"}}},
	}
	if err := f.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: f.host, PodIPs: []corev1.PodIP{{IP: f.host}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	if err := f.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.worker(t, name, "app")
}

// worker creates the Worker object a CronSchedule's workerRef names (the dispatcher
// checks that it exists; its pods are what namespace sets up).
func (f *fleet) worker(t testing.TB, ns, name string) {
	t.Helper()
	main := "export default { async scheduled() {} }"
	w := &fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1alpha1.WorkerSpec{CompatibilityDate: "2025-01-01", Source: fleetv1alpha1.WorkerSource{
			Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: &main}}}}}}
	if err := f.c.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

func (f *fleet) cronSchedule(t *testing.T, ns, name string, spec fleetv1alpha1.CronScheduleSpec) *fleetv1alpha1.CronSchedule {
	t.Helper()
	cs := &fleetv1alpha1.CronSchedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if err := f.c.Create(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func (f *fleet) get(t *testing.T, cs *fleetv1alpha1.CronSchedule) *fleetv1alpha1.CronSchedule {
	t.Helper()
	var out fleetv1alpha1.CronSchedule
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(cs), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// firstSlotAfterCreation is the first slot of expr strictly after the object's
// creation (so no earlier slot counts as missed).
func firstSlotAfterCreation(t *testing.T, cs *fleetv1alpha1.CronSchedule, expr string) time.Time {
	t.Helper()
	s, err := cron.Parse(expr)
	if err != nil {
		t.Fatal(err)
	}
	return s.Next(cs.CreationTimestamp.Time, time.UTC)
}

func workerSpec(expr string) fleetv1alpha1.CronScheduleSpec {
	return fleetv1alpha1.CronScheduleSpec{
		Schedules: []string{expr},
		Target:    fleetv1alpha1.CronTarget{WorkerRef: &fleetv1alpha1.LocalObjectReference{Name: "app"}},
	}
}

func rfc(ts ...time.Time) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.UTC().Format(time.RFC3339))
	}
	return out
}

// runTogether runs one pass of each dispatcher at the same time.
func runTogether(t *testing.T, ds ...*Dispatcher) {
	t.Helper()
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.RunOnce(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func (f *fleet) dispatcher(clock *fakeClock, wall time.Duration) *Dispatcher {
	return NewDispatcher(f.c, DispatcherOptions{Now: clock.Now, TriggerPort: f.port, WallTime: wall, Identity: "test"})
}

func TestDispatcher(t *testing.T) {
	f := startFleet(t)
	ctx := context.Background()

	// Issue 8 "done" 3: `* * * * *` fires scheduled() once per minute with the exact
	// cron string and scheduledTime; history records the outcomes, newest first.
	t.Run("one dispatch per slot", func(t *testing.T) {
		const expr = "* * * * *"
		f.namespace(t, "every-minute")
		cs := f.cronSchedule(t, "every-minute", "tick", workerSpec(expr))
		clock := &fakeClock{}
		d := f.dispatcher(clock, DefaultWallTime)
		t0 := firstSlotAfterCreation(t, cs, expr)
		var slots []time.Time
		for i := 0; i < 3; i++ {
			slot := t0.Add(time.Duration(i) * time.Minute)
			slots = append(slots, slot)
			clock.Set(slot.Add(120 * time.Millisecond))
			next, err := d.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !next.Equal(slot.Add(time.Minute)) {
				t.Fatalf("RunOnce at %s: next = %s, want %s", clock.Now(), next, slot.Add(time.Minute))
			}
			// a second pass in the same minute claims nothing
			if _, err := d.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			d.Wait()
		}
		if got, want := f.calls(t, expr), rfc(slots...); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v", got, want)
		}
		got := f.get(t, cs)
		if len(got.Status.History) != 3 {
			t.Fatalf("history %+v, want 3 rows", got.Status.History)
		}
		for i, ev := range got.Status.History {
			want := slots[len(slots)-1-i]
			if ev.Outcome != fleetv1alpha1.CronOutcomeOK || ev.Cron != expr || !ev.ScheduledTime.Time.Equal(want) {
				t.Errorf("history[%d] = %+v, want ok at %s", i, ev, want)
			}
		}
		if st := got.Status.Schedules; len(st) != 1 || !st[0].LastScheduleTime.Time.Equal(slots[2]) || !st[0].NextScheduleTime.Time.Equal(slots[2].Add(time.Minute)) {
			t.Errorf("status.schedules = %+v", st)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != fleetv1alpha1.ReasonScheduled {
			t.Errorf("Ready condition %+v", c)
		}
	})

	// A handler that calls noRetry() and throws is recorded as exception with noRetry.
	t.Run("exception outcome", func(t *testing.T) {
		const expr = "13 * * * *"
		f.namespace(t, "throws")
		cs := f.cronSchedule(t, "throws", "boom", workerSpec(expr))
		clock := &fakeClock{}
		d := f.dispatcher(clock, DefaultWallTime)
		slot := firstSlotAfterCreation(t, cs, expr)
		clock.Set(slot.Add(50 * time.Millisecond))
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
		got := f.get(t, cs)
		if len(got.Status.History) != 1 {
			t.Fatalf("history %+v", got.Status.History)
		}
		ev := got.Status.History[0]
		if ev.Outcome != fleetv1alpha1.CronOutcomeException || !ev.NoRetry || !ev.ScheduledTime.Time.Equal(slot) {
			t.Fatalf("history[0] = %+v, want exception with noRetry at %s", ev, slot)
		}
	})

	// A run still going after the wall-time limit is recorded as exceededWallTime (the
	// limit is shortened from 15 minutes so the test does not wait for it).
	t.Run("exceeded wall time", func(t *testing.T) {
		const expr = "17 * * * *"
		f.namespace(t, "slow")
		cs := f.cronSchedule(t, "slow", "slow", workerSpec(expr))
		clock := &fakeClock{}
		d := f.dispatcher(clock, time.Second)
		slot := firstSlotAfterCreation(t, cs, expr)
		clock.Set(slot)
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
		got := f.get(t, cs)
		if len(got.Status.History) != 1 || got.Status.History[0].Outcome != fleetv1alpha1.CronOutcomeExceededWallTime {
			t.Fatalf("history %+v, want one exceededWallTime", got.Status.History)
		}
	})

	t.Run("claim ahead", func(t *testing.T) { testClaimAhead(t, f) })

	// A target that does not exist yet (GitOps applies in any order) makes Ready false
	// with ReferenceNotFound, naming the field; once it exists, Ready is true again.
	t.Run("missing target", func(t *testing.T) {
		const ns, expr = "missing-target", "41 * * * *"
		if err := f.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		spec := workerSpec(expr)
		spec.Target.WorkerRef.Name = "later"
		cs := f.cronSchedule(t, ns, "c", spec)
		clock := &fakeClock{}
		clock.Set(firstSlotAfterCreation(t, cs, expr).Add(-30 * time.Second))
		d := NewDispatcher(f.c, DispatcherOptions{Now: clock.Now, TriggerPort: f.port, Namespace: ns})
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(f.get(t, cs).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fleetv1alpha1.ReasonReferenceNotFound ||
			!strings.Contains(c.Message, `spec.target.workerRef: Worker "later" not found in namespace "missing-target"`) {
			t.Fatalf("Ready condition %+v, want False/ReferenceNotFound naming spec.target.workerRef", c)
		}
		f.worker(t, ns, "later")
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(f.get(t, cs).Status.Conditions, fleetv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != fleetv1alpha1.ReasonScheduled {
			t.Fatalf("Ready condition %+v after the Worker was created, want True/Scheduled", c)
		}
	})

	// Issue 8 "done" 4 (the claim part): two dispatchers racing on the same objects at
	// the same instants; each slot reaches the handler exactly once.
	t.Run("exactly once with two dispatchers", func(t *testing.T) {
		const expr = "*/1 * * * *"
		f.namespace(t, "race")
		cs := f.cronSchedule(t, "race", "race", workerSpec(expr))
		clock := &fakeClock{}
		d1, d2 := f.dispatcher(clock, DefaultWallTime), f.dispatcher(clock, DefaultWallTime)
		t0 := firstSlotAfterCreation(t, cs, expr)
		var slots []time.Time
		for i := 0; i < 5; i++ {
			slot := t0.Add(time.Duration(i) * time.Minute)
			slots = append(slots, slot)
			clock.Set(slot)
			runTogether(t, d1, d2)
			d1.Wait()
			d2.Wait()
		}
		if got, want := f.calls(t, expr), rfc(slots...); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want each slot once: %v", got, want)
		}
		if h := f.get(t, cs).Status.History; len(h) != 5 {
			t.Fatalf("history has %d rows, want 5: %+v", len(h), h)
		}
		var m dto.Metric
		_ = claimConflicts.Write(&m)
		t.Logf("claim conflicts so far: %v", m.GetCounter().GetValue())
	})

	// Issue 8 "done" 5: dispatcher stopped over five slots; startingDeadlineSeconds
	// covers only the last two, and exactly those are dispatched on restart.
	t.Run("catch-up within startingDeadlineSeconds", func(t *testing.T) {
		const expr = "0-59 * * * *"
		f.namespace(t, "catch-up")
		spec := workerSpec(expr)
		deadline := int64(90)
		spec.StartingDeadlineSeconds = &deadline
		cs := f.cronSchedule(t, "catch-up", "catch-up", spec)
		clock := &fakeClock{}
		t0 := firstSlotAfterCreation(t, cs, expr)
		clock.Set(t0)
		d := f.dispatcher(clock, DefaultWallTime)
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
		// stopped during t0+1m .. t0+5m; a new dispatcher starts at t0+5m30s: the
		// window (90 s) covers t0+4m and t0+5m only.
		clock.Set(t0.Add(5*time.Minute + 30*time.Second))
		d2 := f.dispatcher(clock, DefaultWallTime)
		if _, err := d2.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		d2.Wait()
		// concurrencyPolicy Allow: the two caught-up slots run at the same time, so their
		// calls arrive in either order.
		want := rfc(t0, t0.Add(4*time.Minute), t0.Add(5*time.Minute))
		got := f.calls(t, expr)
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v", got, want)
		}
		h := f.get(t, cs).Status.History
		var skipped int
		for _, ev := range h {
			if ev.Outcome == fleetv1alpha1.CronOutcomeSkipped {
				skipped++
				if !strings.Contains(ev.Message, "3 earlier missed slot") {
					t.Errorf("skipped row %q does not count the 3 missed slots", ev.Message)
				}
			}
		}
		if skipped != 1 {
			t.Errorf("history %+v: want one skipped row", h)
		}
	})

	// The Worker exists but has no ready pod: recorded as unreachable, Ready=False
	// TargetNotReady.
	t.Run("target not ready", func(t *testing.T) {
		const expr = "* * * * *"
		f.namespace(t, "no-pods")
		f.worker(t, "no-pods", "ghost")
		spec := workerSpec(expr)
		spec.Target.WorkerRef.Name = "ghost"
		cs := f.cronSchedule(t, "no-pods", "ghost", spec)
		clock := &fakeClock{}
		d := f.dispatcher(clock, DefaultWallTime)
		clock.Set(firstSlotAfterCreation(t, cs, expr))
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
		got := f.get(t, cs)
		if len(got.Status.History) != 1 || got.Status.History[0].Outcome != fleetv1alpha1.CronOutcomeUnreachable {
			t.Fatalf("history %+v", got.Status.History)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady); c == nil || c.Reason != fleetv1alpha1.ReasonTargetNotReady {
			t.Fatalf("Ready condition %+v, want TargetNotReady", c)
		}
	})

	// Suspended: nothing is dispatched; after resuming, slots passed meanwhile are not
	// caught up, the next one is.
	t.Run("suspend", func(t *testing.T) {
		const expr = "1-59 * * * *"
		f.namespace(t, "suspend")
		spec := workerSpec(expr)
		spec.Suspend = true
		cs := f.cronSchedule(t, "suspend", "paused", spec)
		clock := &fakeClock{}
		d := f.dispatcher(clock, DefaultWallTime)
		t0 := firstSlotAfterCreation(t, cs, expr)
		clock.Set(t0.Add(time.Minute))
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		got := f.get(t, cs)
		if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady); c == nil || c.Reason != fleetv1alpha1.ReasonSuspended {
			t.Fatalf("Ready condition %+v, want Suspended", c)
		}
		got.Spec.Suspend = false
		if err := f.c.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		clock.Set(t0.Add(2*time.Minute + time.Second))
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		sched, _ := cron.Parse(expr)
		next := sched.Next(clock.Now(), time.UTC)
		clock.Set(next)
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
		if got, want := f.calls(t, expr), rfc(next); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want only %v", got, want)
		}
	})

	// Start's own loop on a clock running at real speed (shifted to just before a slot):
	// the timer wakes at the slot and dispatches it once.
	t.Run("Start fires on the timer", func(t *testing.T) {
		const expr = "0-59/1 * * * *"
		f.namespace(t, "timer")
		cs := f.cronSchedule(t, "timer", "timer", workerSpec(expr))
		slot := firstSlotAfterCreation(t, cs, expr)
		if slot.Sub(cs.CreationTimestamp.Time) < 2*time.Second {
			slot = slot.Add(time.Minute)
		}
		offset := slot.Add(-1500 * time.Millisecond).Sub(time.Now())
		d := NewDispatcher(f.c, DispatcherOptions{
			Now: func() time.Time { return time.Now().Add(offset) }, TriggerPort: f.port})
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Start(runCtx) }()
		for i := 0; len(f.get(t, cs).Status.History) == 0; i++ {
			if i > 600 {
				t.Fatal("no dispatch recorded within a minute")
			}
			time.Sleep(100 * time.Millisecond)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		d.Wait()
		if got, want := f.calls(t, expr), rfc(slot); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls %v, want %v", got, want)
		}
	})

	// An expression added to a dispatching CronSchedule starts with the slots after it
	// was added: its earlier slots are not run late.
	t.Run("added expression", func(t *testing.T) {
		const first, added = "*/2 * * * *", "0-58/2 * * * *"
		f.namespace(t, "added")
		cs := f.cronSchedule(t, "added", "added", workerSpec(first))
		clock := &fakeClock{}
		d := f.dispatcher(clock, DefaultWallTime)
		t0 := firstSlotAfterCreation(t, cs, first)
		clock.Set(t0)
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
		got := f.get(t, cs)
		got.Spec.Schedules = append(got.Spec.Schedules, added)
		if err := f.c.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		// added at t0+1m: the pass then arms it; its first slot is t0+2m.
		clock.Set(t0.Add(time.Minute))
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Set(t0.Add(2 * time.Minute))
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
		if got, want := f.calls(t, added), rfc(t0.Add(2*time.Minute)); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls of the added expression %v, want %v", got, want)
		}
		if got, want := f.calls(t, first), rfc(t0, t0.Add(2*time.Minute)); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("scheduled() calls of the first expression %v, want %v", got, want)
		}
	})
}
