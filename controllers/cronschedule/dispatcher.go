package cronschedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/cron"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Defaults of DispatcherOptions, with their sources.
const (
	// DefaultWallTime is the wall-time limit of one scheduled() run: 15 minutes for Cron
	// Triggers (https://developers.cloudflare.com/workers/platform/limits/#duration).
	DefaultWallTime = 15 * time.Minute
	// DefaultResync is the longest the dispatcher sleeps without looking at the
	// CronSchedules again (new and changed objects are noticed within it).
	DefaultResync = 2 * time.Second
	// DefaultHistoryLimit is spec.historyLimit's default (api/v1alpha1).
	DefaultHistoryLimit = 10
	// DefaultParallelism bounds the CronSchedules processed at once.
	DefaultParallelism = 32
)

// WorkflowStarter creates one Workflow instance per firing of a CronSchedule whose
// target is a workflowRef, with event.schedule set to the cron expression (and
// event.timestamp to scheduledTime).
// The manager passes EngineStarter (the engine API of the Workflow's engine pod);
// without one, workflow targets are recorded as unreachable.
type WorkflowStarter interface {
	// StartScheduled creates the instance and returns its id. params is the
	// CronSchedule's spec.target.params (may be nil).
	StartScheduled(ctx context.Context, namespace, workflow string, params *apiextensionsv1.JSON, cron string, scheduledTime time.Time) (instanceID string, err error)
}

// DispatcherOptions configures a Dispatcher. The zero value works in a manager.
type DispatcherOptions struct {
	// Now is the clock (default time.Now). Tests move it to a slot instead of waiting.
	Now func() time.Time
	// APIReader reads uncached objects after a write conflict (the manager's
	// GetAPIReader()); default: the client itself.
	APIReader client.Reader
	// HTTPClient calls the trigger sockets (default: a client with no overall timeout;
	// WallTime bounds every call).
	HTTPClient *http.Client
	// TriggerPort is the pods' trigger socket port (default 9091).
	TriggerPort int
	// Issuer, when set, makes the trigger calls mutual TLS with the manager's
	// certificate (the manager sets it); without it they are plain HTTP on HTTPClient.
	Issuer *internalca.Issuer
	// WallTime limits one run (default 15 min); a run still going after it is recorded
	// as exceededWallTime and its request is cancelled.
	WallTime time.Duration
	// Resync is the longest sleep between two looks at the CronSchedules (default 2 s).
	Resync time.Duration
	// Parallelism bounds how many CronSchedules are claimed at once (default 32).
	Parallelism int
	// Namespace limits the dispatcher to one namespace ("" = all).
	Namespace string
	// Recorder emits Events on the CronSchedules (optional; the manager's
	// GetEventRecorder("cron-dispatcher")).
	Recorder events.EventRecorder
	// Workflows starts Workflow instances for workflowRef targets (optional; see
	// WorkflowStarter).
	Workflows WorkflowStarter
	// Identity names this dispatcher in history messages (default: the host name, which
	// is the pod name in a cluster).
	Identity string
	// Log is the logger (default: discard).
	Log logr.Logger
	// DispatchRecord names the Lease in which the dispatcher confirms the slots it
	// claimed ahead (claimahead.go). Empty: no claim-ahead; every slot is claimed in
	// its CronSchedule's status as it comes due. The manager uses
	// "workerd-operator-cron-dispatch" in its leader-election namespace.
	DispatchRecord types.NamespacedName
	// ClaimAhead is how long before a slot it is claimed when DispatchRecord is set
	// (default 10 s; negative: claim as slots come due).
	ClaimAhead time.Duration
}

// Dispatcher fires CronSchedules. It is a manager.Runnable that needs leader election;
// even so, every slot is claimed in the CronSchedule's status with optimistic
// concurrency before it is dispatched, so two dispatchers (a stale leader and a new
// one) never dispatch the same slot twice. With a DispatchRecord, upcoming slots are
// claimed ClaimAhead early and confirmed at the slot with one write to the record
// (claimahead.go, docs/cron.md), so that a minute firing many CronSchedules is not
// late by one status write per CronSchedule.
//
// Semantics: slots are computed per expression in spec.timeZone (default
// UTC); spec.suspend stops dispatching and slots passed while suspended are not caught
// up; spec.startingDeadlineSeconds is the catch-up window after downtime (without it
// only the newest missed slot runs; older ones are recorded as one "skipped" history
// row); concurrencyPolicy Forbid records a slot as skipped while a run of the same
// CronSchedule is in flight in this process, Replace cancels that run (recorded as an
// exception saying so), Allow runs both. A run is not retried: Cloudflare's retry
// policy is undocumented; noRetry is recorded.
// Metrics (metrics.go): workerd_operator_cron_dispatch_lateness_seconds,
// workerd_operator_cron_dispatches_total{namespace,cronschedule,outcome},
// workerd_operator_cron_claim_conflicts_total.
type Dispatcher struct {
	c    client.Client
	opts DispatcherOptions

	mu      sync.Mutex
	running map[types.NamespacedName]*run
	wg      sync.WaitGroup

	// written holds the last version of each CronSchedule this dispatcher wrote. A
	// cached client lags behind our own writes; starting from our copy avoids claiming
	// (and conflicting on) a slot we already claimed. It never adds a dispatch: a
	// stale copy only makes a claim conflict and re-read.
	writtenMu sync.Mutex
	written   map[types.NamespacedName]*fleetv1alpha1.CronSchedule

	// pass is held for writing by RunOnce while it claims slots; a finished run takes
	// it for reading around its history write, so at a busy minute boundary the claims
	// (which gate the dispatches) do not share the API server with the history writes
	// of the runs they already started.
	pass sync.RWMutex

	ah ahead
}

// remember records cs as the newest version this dispatcher wrote.
func (d *Dispatcher) remember(cs *fleetv1alpha1.CronSchedule) {
	d.writtenMu.Lock()
	defer d.writtenMu.Unlock()
	d.written[client.ObjectKeyFromObject(cs)] = cs.DeepCopy()
}

// freshest returns our own last write of cs when it is at least as new in spec
// (same UID, generation not older) as the listed cs, else cs.
func (d *Dispatcher) freshest(cs *fleetv1alpha1.CronSchedule) *fleetv1alpha1.CronSchedule {
	d.writtenMu.Lock()
	defer d.writtenMu.Unlock()
	w := d.written[client.ObjectKeyFromObject(cs)]
	if w == nil || w.UID != cs.UID || w.Generation < cs.Generation || w.ResourceVersion == cs.ResourceVersion {
		return cs
	}
	return w.DeepCopy()
}

type run struct {
	slot   time.Time
	cancel context.CancelFunc
	// replaced is set when a newer slot cancelled this run (concurrencyPolicy Replace).
	replaced time.Time
}

// The dispatcher's permissions (controller-gen rbac, paths="./...").
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=cronschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=cronschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workers;workflows,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// NewDispatcher returns a dispatcher using c for reads and status writes.
// controller.SetupAll adds it to the manager.
func NewDispatcher(c client.Client, opts DispatcherOptions) *Dispatcher {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.APIReader == nil {
		opts.APIReader = c
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: triggerTransport()}
	}
	if opts.TriggerPort == 0 {
		opts.TriggerPort = podcontract.TriggerPort
	}
	if opts.WallTime == 0 {
		opts.WallTime = DefaultWallTime
	}
	if opts.Resync == 0 {
		opts.Resync = DefaultResync
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = DefaultParallelism
	}
	if opts.Identity == "" {
		opts.Identity, _ = os.Hostname()
	}
	if opts.ClaimAhead == 0 {
		opts.ClaimAhead = DefaultClaimAhead
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	registerMetrics()
	return &Dispatcher{c: c, opts: opts, running: map[types.NamespacedName]*run{},
		written: map[types.NamespacedName]*fleetv1alpha1.CronSchedule{},
		// A fresh suffix per process: a restarted dispatcher must not pass for the
		// one that made the claims ahead it finds.
		ah: ahead{id: fmt.Sprintf("%s-%08x", opts.Identity, rand.Uint32()), pending: map[reservation]bool{}}}
}

// triggerTransport is the default transport to the pods' trigger sockets: no overall
// timeout (WallTime bounds each call), and connections kept open between slots, so
// that a minute firing many CronSchedules at one Worker does not open a connection
// per dispatch each time.
func triggerTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}
}

// NeedLeaderElection makes the manager run the dispatcher on the leader only.
func (d *Dispatcher) NeedLeaderElection() bool { return true }

// Start runs until ctx ends: it dispatches every due slot, then sleeps until the next
// slot of any CronSchedule (a timer to that instant, not a ticker) or at most Resync.
// Runs in flight when ctx ends continue (bounded by WallTime) and are recorded;
// Wait waits for them.
func (d *Dispatcher) Start(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		next, err := d.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			d.opts.Log.Error(err, "cron dispatcher pass failed")
		}
		// Wake at the next slot, or ClaimAhead before it, or at the earliest slot
		// claimed ahead, whichever comes first; at most Resync from now.
		wake := next
		if !wake.IsZero() && d.claimAheadEnabled() {
			wake = wake.Add(-d.opts.ClaimAhead)
		}
		if p := d.earliestPending(); !p.IsZero() && (wake.IsZero() || p.Before(wake)) {
			wake = p
		}
		wait := d.opts.Resync
		if !wake.IsZero() {
			if w := wake.Sub(d.opts.Now()); w < wait {
				wait = max(w, 0)
			}
		}
		if err != nil {
			// A failing pass (say, claims ahead that cannot be confirmed yet) is not
			// retried in a tight loop.
			wait = max(wait, d.opts.Resync/2)
		}
		timer.Reset(wait)
	}
}

// Wait blocks until every run started so far has finished and been recorded.
func (d *Dispatcher) Wait() { d.wg.Wait() }

// RunOnce dispatches the slots it claimed ahead that are due, claims and dispatches
// every other slot due at Now() for every CronSchedule, claims ahead the slots due
// within ClaimAhead (with a DispatchRecord), and returns the earliest next slot not yet
// claimed over all of them (zero if none). Dispatches run in the background (see
// Wait); claims are done when RunOnce returns.
func (d *Dispatcher) RunOnce(ctx context.Context) (time.Time, error) {
	w, dueErr := d.dispatchDue(ctx, d.opts.Now())
	if dueErr != nil {
		// The claims stay pending and are confirmed on a later pass; the rest of
		// cron goes on.
		d.opts.Log.Error(dueErr, "confirm claims ahead")
	}
	// The rest of the pass (a list of every CronSchedule, and its writes) waits for the
	// wave just dispatched, as the wave's history writes do.
	w.wait()
	rec := d.passRecord(ctx)
	var list fleetv1alpha1.CronScheduleList
	var opts []client.ListOption
	if d.opts.Namespace != "" {
		opts = append(opts, client.InNamespace(d.opts.Namespace))
	}
	if err := d.c.List(ctx, &list, opts...); err != nil {
		return time.Time{}, fmt.Errorf("cron: list CronSchedules: %w", err)
	}
	d.pass.Lock()
	defer d.pass.Unlock()
	d.forgetUnlisted(list.Items)
	next, err := d.processAll(ctx, list.Items, rec)
	return next, errors.Join(err, dueErr)
}

// passRecord reads the dispatch record for this pass (nil without claim-ahead).
func (d *Dispatcher) passRecord(ctx context.Context) dispatchRecord {
	if !d.claimAheadEnabled() {
		return nil
	}
	r, err := d.readRecord(ctx)
	if err != nil {
		// Cron must not stop with its record (RBAC, an API error): this pass claims
		// slots as they come due, and leaves claims in doubt for a later one.
		d.opts.Log.Error(err, "cron dispatch record unavailable; this pass claims slots as they come due")
	}
	return r
}

// forgetUnlisted drops our last writes and the outcome series of CronSchedules that
// are gone.
func (d *Dispatcher) forgetUnlisted(items []fleetv1alpha1.CronSchedule) {
	listed := map[types.NamespacedName]bool{}
	for i := range items {
		listed[client.ObjectKeyFromObject(&items[i])] = true
	}
	forgetSeries(d.opts.Namespace, listed)
	d.writtenMu.Lock()
	defer d.writtenMu.Unlock()
	for k := range d.written {
		if !listed[k] {
			delete(d.written, k)
		}
	}
}

// processAll processes every CronSchedule, Parallelism at once, and returns the
// earliest next slot over all of them.
func (d *Dispatcher) processAll(ctx context.Context, items []fleetv1alpha1.CronSchedule, rec dispatchRecord) (time.Time, error) {
	var (
		mu    sync.Mutex
		next  time.Time
		errs  []error
		wg    sync.WaitGroup
		slots = make(chan struct{}, d.opts.Parallelism)
	)
	for i := range items {
		cs := d.freshest(&items[i])
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			n, err := d.process(ctx, cs, rec)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", cs.Namespace, cs.Name, err))
			}
			if !n.IsZero() && (next.IsZero() || n.Before(next)) {
				next = n
			}
		}()
	}
	wg.Wait()
	return next, errors.Join(errs...)
}

// expression is one parsed entry of spec.schedules.
type expression struct {
	text  string
	sched *cron.Schedule
}

// process claims and dispatches the due slots of one CronSchedule, claims its upcoming
// slots ahead (rec is the dispatch record; nil without claim-ahead), and returns its
// next slot not yet claimed.
func (d *Dispatcher) process(ctx context.Context, cs *fleetv1alpha1.CronSchedule, rec dispatchRecord) (time.Time, error) {
	if cs.DeletionTimestamp != nil {
		return time.Time{}, nil
	}
	ctx = log.IntoContext(ctx, d.opts.Log.WithValues("cronschedule", client.ObjectKeyFromObject(cs)))
	now := d.opts.Now()
	loc, exprs, specErr := parseSpec(cs)
	if specErr != nil {
		return time.Time{}, d.setCondition(ctx, cs, metav1.ConditionFalse, fleetv1alpha1.ReasonInvalidSpec, specErr.Error())
	}
	if cs.Spec.Suspend {
		return time.Time{}, d.setCondition(ctx, cs, metav1.ConditionFalse, fleetv1alpha1.ReasonSuspended,
			"spec.suspend is true: no slot is dispatched, and slots passed while suspended are not caught up")
	}
	resumed, err := d.syncReady(ctx, cs)
	if err != nil {
		return time.Time{}, err
	}
	if err := d.armNew(ctx, cs, exprs, loc, now); err != nil {
		return time.Time{}, err
	}
	var next time.Time
	for _, e := range exprs {
		n, err := d.processExpression(ctx, cs, e, loc, now, resumed, rec)
		if err != nil {
			return time.Time{}, err
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next, nil
}

// syncReady sets Ready of a CronSchedule that is not suspended: ReferenceNotFound
// while its target is missing, Scheduled once it dispatches again. It reports whether
// the CronSchedule was just resumed from suspension.
func (d *Dispatcher) syncReady(ctx context.Context, cs *fleetv1alpha1.CronSchedule) (bool, error) {
	ready := meta.FindStatusCondition(cs.Status.Conditions, fleetv1alpha1.ConditionReady)
	resumed := ready != nil && ready.Reason == fleetv1alpha1.ReasonSuspended
	if missing := d.missingTarget(ctx, cs); missing != "" {
		// Still dispatching (GitOps may apply the target later): each slot until then
		// is recorded as unreachable.
		return resumed, d.setCondition(ctx, cs, metav1.ConditionFalse, fleetv1alpha1.ReasonReferenceNotFound, missing)
	}
	if ready == nil || resumed || ready.Reason == fleetv1alpha1.ReasonInvalidSpec || ready.Reason == fleetv1alpha1.ReasonReferenceNotFound {
		return resumed, d.setCondition(ctx, cs, metav1.ConditionTrue, fleetv1alpha1.ReasonScheduled, "dispatching")
	}
	return resumed, nil
}

// processExpression claims and dispatches the due slots of expression e, claims its
// upcoming slots ahead (rec; nil without claim-ahead), and returns its next slot not
// yet claimed.
func (d *Dispatcher) processExpression(ctx context.Context, cs *fleetv1alpha1.CronSchedule, e expression, loc *time.Location, now time.Time, resumed bool, rec dispatchRecord) (time.Time, error) {
	due, skipped, lastSkipped := d.dueSlots(cs, e, loc, now, resumed, d.inDoubt(rec, stateOf(cs, e.text)))
	if resumed && len(due) > 0 {
		// Slots passed while suspended are not caught up: claim the newest without
		// dispatching it.
		if _, _, err := d.claimSlot(ctx, cs, e, loc, due[len(due)-1], "", rec); err != nil {
			return time.Time{}, err
		}
		due = nil
	}
	for i, slot := range due {
		ok, prev, err := d.claimSlot(ctx, cs, e, loc, slot, "", rec)
		if err != nil {
			return time.Time{}, err
		}
		if !ok {
			continue // another dispatcher claimed it
		}
		if i == 0 && skipped > 0 {
			d.recordSkipped(ctx, cs, e, loc, prev, skipped, lastSkipped)
		}
		d.dispatch(ctx, cs, e.text, slot)
	}
	n := e.sched.Next(now, loc)
	if rec != nil && !resumed {
		return d.claimAheadOf(ctx, cs, e, rec, loc, now)
	}
	return n, nil
}

// recordSkipped records the missed slots of e up to lastSkipped, older than the
// catch-up window, as one "skipped" history row. prev is the claim the first due
// slot's claim replaced: dueSlots counted skipped from the object as first read, and
// another dispatcher may have claimed some of those slots since, so only the slots
// between prev and the catch-up window count.
func (d *Dispatcher) recordSkipped(ctx context.Context, cs *fleetv1alpha1.CronSchedule, e expression, loc *time.Location, prev time.Time, skipped int, lastSkipped time.Time) {
	if !prev.IsZero() {
		skipped = 0
		for t := e.sched.Next(prev, loc); !t.IsZero() && !t.After(lastSkipped) && skipped < 100000; t = e.sched.Next(t, loc) {
			skipped++
		}
	}
	if skipped == 0 {
		return
	}
	if w := d.record(ctx, client.ObjectKeyFromObject(cs), fleetv1alpha1.CronEvent{
		Cron: e.text, ScheduledTime: metav1.NewTime(lastSkipped), Outcome: fleetv1alpha1.CronOutcomeSkipped,
		Message: fmt.Sprintf("%d earlier missed slot(s) up to this one skipped: older than the catch-up window (spec.startingDeadlineSeconds; default: only the newest slot)", skipped),
	}, "", cs.DeepCopy()); w != nil {
		*cs = *w
	}
	outcomes.WithLabelValues(cs.Namespace, cs.Name, string(fleetv1alpha1.CronOutcomeSkipped)).Add(float64(skipped))
}

// missingTarget returns why spec.target names an object that does not exist ("" when
// it exists, or when it cannot be read: the dispatch then says what went wrong).
func (d *Dispatcher) missingTarget(ctx context.Context, cs *fleetv1alpha1.CronSchedule) string {
	var obj client.Object
	var field, kind, name string
	switch t := cs.Spec.Target; {
	case t.WorkerRef != nil:
		obj, field, kind, name = &fleetv1alpha1.Worker{}, "spec.target.workerRef", "Worker", t.WorkerRef.Name
	case t.WorkflowRef != nil:
		obj, field, kind, name = &fleetv1alpha1.Workflow{}, "spec.target.workflowRef", "Workflow", t.WorkflowRef.Name
	default:
		return ""
	}
	if err := d.c.Get(ctx, types.NamespacedName{Namespace: cs.Namespace, Name: name}, obj); !apierrors.IsNotFound(err) {
		return ""
	}
	return fmt.Sprintf("%s: %s %q not found in namespace %q; each slot is recorded as unreachable until it exists", field, kind, name, cs.Namespace)
}

// armNew gives an expression added to an already dispatching CronSchedule its state,
// with nextScheduleTime after now, so that it does not fire slots from before it was
// added (a brand-new CronSchedule instead counts slots from its creation).
func (d *Dispatcher) armNew(ctx context.Context, cs *fleetv1alpha1.CronSchedule, exprs []expression, loc *time.Location, now time.Time) error {
	if len(cs.Status.Schedules) == 0 {
		return nil
	}
	var missing []fleetv1alpha1.CronScheduleState
	for _, e := range exprs {
		if stateOf(cs, e.text) == nil {
			st := fleetv1alpha1.CronScheduleState{Cron: e.text}
			if n := e.sched.Next(now, loc); !n.IsZero() {
				st.NextScheduleTime = &metav1.Time{Time: n}
			}
			missing = append(missing, st)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	fresh := cs.DeepCopy()
	fresh.Status.Schedules = append(fresh.Status.Schedules, missing...)
	if err := d.c.Status().Update(ctx, fresh); err != nil {
		return fmt.Errorf("arm new expressions: %w", err) // retried on the next pass
	}
	*cs = *fresh
	d.remember(cs)
	return nil
}

func parseSpec(cs *fleetv1alpha1.CronSchedule) (*time.Location, []expression, error) {
	loc := time.UTC
	if cs.Spec.TimeZone != "" {
		l, err := time.LoadLocation(cs.Spec.TimeZone)
		if err != nil {
			return nil, nil, fmt.Errorf("spec.timeZone %q is not a time zone Go's time database knows: %v", cs.Spec.TimeZone, err)
		}
		loc = l
	}
	var exprs []expression
	for i, text := range cs.Spec.Schedules {
		s, err := cron.Validate(text)
		if err != nil {
			return nil, nil, fmt.Errorf("spec.schedules[%d]: %v", i, err)
		}
		exprs = append(exprs, expression{text: text, sched: s})
	}
	return loc, exprs, nil
}

func stateOf(cs *fleetv1alpha1.CronSchedule, text string) *fleetv1alpha1.CronScheduleState {
	for i := range cs.Status.Schedules {
		if cs.Status.Schedules[i].Cron == text {
			return &cs.Status.Schedules[i]
		}
	}
	return nil
}

// dueSlots lists the slots of e to dispatch at now, oldest first, and how many older
// missed slots fall outside the catch-up window (and the newest of those). Slots are
// strictly after the last claimed slot (or the object's creation second) and at or before
// now; without startingDeadlineSeconds only the newest is due, with it every slot no
// older than that many seconds (computed from the real schedule, never estimated).
// inDoubt: the last claimed slot was claimed ahead by a fenced dispatcher that never
// dispatched it, so it counts as not claimed.
func (d *Dispatcher) dueSlots(cs *fleetv1alpha1.CronSchedule, e expression, loc *time.Location, now time.Time, resumed, inDoubt bool) ([]time.Time, int, time.Time) {
	// Strictly after creation, as Kubernetes' CronJob controller counts: the timestamp
	// is truncated to the second, so a slot equal to it may be up to 1 s before the
	// object existed (created at 12:00:00.4, the 12:00 slot was recorded as a missed
	// slot it never had).
	from := cs.CreationTimestamp.Time
	if st := stateOf(cs, e.text); st != nil && st.LastScheduleTime != nil {
		from = st.LastScheduleTime.Time
		if inDoubt {
			from = from.Add(-time.Nanosecond)
		}
	} else if st != nil && st.NextScheduleTime != nil {
		from = st.NextScheduleTime.Time.Add(-time.Nanosecond) // armed by armNew
	}
	if !from.Before(now) {
		return nil, 0, time.Time{}
	}
	var start time.Time
	if dl := cs.Spec.StartingDeadlineSeconds; dl != nil && !resumed {
		start = now.Add(-time.Duration(*dl) * time.Second).Add(-time.Nanosecond)
	} else {
		// Only the newest slot in (from, now]: find it in windows growing backwards.
		for span := time.Hour; ; span *= 2 {
			start = now.Add(-span)
			if !start.After(from) || span > 100*365*24*time.Hour {
				start = from
				break
			}
			if t := e.sched.Next(start, loc); !t.IsZero() && !t.After(now) {
				break
			}
		}
		var newest time.Time
		for t := e.sched.Next(start, loc); !t.IsZero() && !t.After(now); t = e.sched.Next(t, loc) {
			newest = t
		}
		if newest.IsZero() {
			return nil, 0, time.Time{}
		}
		start = newest.Add(-time.Nanosecond)
	}
	skipped, lastSkipped := 0, time.Time{}
	if start.After(from) {
		for t := e.sched.Next(from, loc); !t.IsZero() && !t.After(start) && skipped < 100000; t = e.sched.Next(t, loc) {
			skipped, lastSkipped = skipped+1, t
		}
	} else {
		start = from
	}
	var due []time.Time
	for t := e.sched.Next(start, loc); !t.IsZero() && !t.After(now); t = e.sched.Next(t, loc) {
		due = append(due, t)
	}
	return due, skipped, lastSkipped
}

// claimSlot writes slot as e's lastScheduleTime with optimistic concurrency (the
// object's resourceVersion), and aheadBy as its claimedAheadBy ("" for a slot claimed
// as it comes due), and reports whether this dispatcher won it, and the
// lastScheduleTime its write replaced (zero if none). cs is updated to the newest object
// seen. A conflict re-reads the object: if the slot (or a later one) is already claimed,
// another dispatcher owns it, unless rec shows that claim in doubt (claimahead.go).
func (d *Dispatcher) claimSlot(ctx context.Context, cs *fleetv1alpha1.CronSchedule, e expression, loc *time.Location, slot time.Time, aheadBy string, rec dispatchRecord) (bool, time.Time, error) {
	for attempt := 0; attempt < 10; attempt++ {
		st := stateOf(cs, e.text)
		if st != nil && st.LastScheduleTime != nil && st.LastScheduleTime.Time.Equal(slot) && aheadBy != "" && st.ClaimedAheadBy == aheadBy {
			// Our own claim ahead, whose write landed though we saw an error.
			return true, time.Time{}, nil
		}
		if st != nil && st.LastScheduleTime != nil && !st.LastScheduleTime.Time.Before(slot) &&
			!(st.LastScheduleTime.Time.Equal(slot) && d.inDoubt(rec, st)) {
			return false, time.Time{}, nil
		}
		var prev time.Time
		if st != nil && st.LastScheduleTime != nil {
			prev = st.LastScheduleTime.Time
		}
		fresh := cs.DeepCopy()
		// keep one state per current expression
		var states []fleetv1alpha1.CronScheduleState
		for _, text := range fresh.Spec.Schedules {
			if s := stateOf(fresh, text); s != nil {
				states = append(states, *s)
			} else {
				states = append(states, fleetv1alpha1.CronScheduleState{Cron: text})
			}
		}
		fresh.Status.Schedules = states
		st = stateOf(fresh, e.text)
		st.LastScheduleTime = &metav1.Time{Time: slot}
		st.ClaimedAheadBy = aheadBy
		if n := e.sched.Next(slot, loc); !n.IsZero() {
			st.NextScheduleTime = &metav1.Time{Time: n}
		}
		if fresh.Status.LastScheduleTime == nil || fresh.Status.LastScheduleTime.Time.Before(slot) {
			fresh.Status.LastScheduleTime = &metav1.Time{Time: slot}
		}
		fresh.Status.ObservedGeneration = fresh.Generation
		err := d.c.Status().Update(ctx, fresh)
		if err == nil {
			*cs = *fresh
			d.remember(cs)
			return true, prev, nil
		}
		if !apierrors.IsConflict(err) {
			return false, time.Time{}, fmt.Errorf("claim slot %s of %q: %w", slot.UTC().Format(time.RFC3339), e.text, err)
		}
		claimConflicts.Inc()
		var latest fleetv1alpha1.CronSchedule
		if err := d.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(cs), &latest); err != nil {
			return false, time.Time{}, fmt.Errorf("claim slot %s of %q: re-read after conflict: %w", slot.UTC().Format(time.RFC3339), e.text, err)
		}
		*cs = latest
	}
	return false, time.Time{}, fmt.Errorf("claim slot %s of %q: still conflicting after 10 attempts", slot.UTC().Format(time.RFC3339), e.text)
}

// dispatch runs one claimed slot in the background, honouring concurrencyPolicy.
func (d *Dispatcher) dispatch(ctx context.Context, cs *fleetv1alpha1.CronSchedule, cron string, slot time.Time) {
	d.dispatchIn(ctx, cs, cron, slot, nil)
}

// dispatchIn is dispatch as part of wave w (nil: none): the run's history write waits
// for the wave (see wave).
func (d *Dispatcher) dispatchIn(ctx context.Context, cs *fleetv1alpha1.CronSchedule, cron string, slot time.Time, w *wave) {
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.WallTime)
	h := d.startRun(ctx, cs, cron, slot, w, cancel)
	if h == nil {
		cancel()
		return
	}
	target := cs.Spec.Target
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer cancel()
		var ev fleetv1alpha1.CronEvent
		var notReady string
		switch {
		case target.WorkerRef != nil:
			ev, notReady = d.callWorker(runCtx, h.key.Namespace, target.WorkerRef.Name, cron, slot, w)
		case target.WorkflowRef != nil:
			ev = d.startWorkflow(runCtx, h.key.Namespace, target, cron, slot)
		default:
			ev = fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable, Message: "spec.target names neither a workerRef nor a workflowRef"}
		}
		d.finishRun(ctx, h, ev, notReady)
	}()
}

// runHandle is one run between startRun and finishRun.
type runHandle struct {
	key   types.NamespacedName
	cron  string
	slot  time.Time
	start time.Time
	r     *run
	known *fleetv1alpha1.CronSchedule // the object as just claimed
	w     *wave
}

// startRun registers a run of slot under concurrencyPolicy (cancel stops it when a
// Replace run takes over). With Forbid and a run still going, it records the slot as
// skipped and returns nil.
func (d *Dispatcher) startRun(ctx context.Context, cs *fleetv1alpha1.CronSchedule, cron string, slot time.Time, w *wave, cancel context.CancelFunc) *runHandle {
	key := client.ObjectKeyFromObject(cs)
	policy := cs.Spec.ConcurrencyPolicy
	d.mu.Lock()
	prev := d.running[key]
	if prev != nil && policy == fleetv1alpha1.ConcurrencyForbid {
		d.mu.Unlock()
		w.started()
		d.record(ctx, key, fleetv1alpha1.CronEvent{
			Cron: cron, ScheduledTime: metav1.NewTime(slot), Outcome: fleetv1alpha1.CronOutcomeSkipped,
			Message: fmt.Sprintf("the run of slot %s is still going (concurrencyPolicy Forbid)", prev.slot.UTC().Format(time.RFC3339)),
		}, "", nil)
		return nil
	}
	if prev != nil && policy == fleetv1alpha1.ConcurrencyReplace {
		prev.replaced = slot
		prev.cancel()
	}
	r := &run{slot: slot, cancel: cancel}
	d.running[key] = r
	d.mu.Unlock()
	start := d.opts.Now()
	lateness.Observe(start.Sub(slot).Seconds())
	return &runHandle{key: key, cron: cron, slot: slot, start: start, r: r, known: cs.DeepCopy(), w: w}
}

// finishRun records the run's outcome ev (after its wave, see wave) and unregisters it.
func (d *Dispatcher) finishRun(ctx context.Context, h *runHandle, ev fleetv1alpha1.CronEvent, notReady string) {
	h.w.started()
	h.w.wait()
	d.mu.Lock()
	if !h.r.replaced.IsZero() {
		ev.Outcome = fleetv1alpha1.CronOutcomeException
		ev.Message = fmt.Sprintf("cancelled: replaced by the run of slot %s (concurrencyPolicy Replace)", h.r.replaced.UTC().Format(time.RFC3339))
	}
	if d.running[h.key] == h.r {
		delete(d.running, h.key)
	}
	d.mu.Unlock()
	ev.Cron, ev.ScheduledTime = h.cron, metav1.NewTime(h.slot)
	ev.Start = &metav1.Time{Time: h.start}
	ev.DurationMs = d.opts.Now().Sub(h.start).Milliseconds()
	outcomes.WithLabelValues(h.key.Namespace, h.key.Name, string(ev.Outcome)).Inc()
	d.pass.RLock() // after the current pass's claims
	defer d.pass.RUnlock()
	d.record(context.WithoutCancel(ctx), h.key, ev, notReady, h.known)
}

// triggerResult is the trigger socket's answer (docs/pod-contract.md).
type triggerResult struct {
	// Index is the run's place in a /scheduled-batch request.
	Index   int    `json:"index"`
	Outcome string `json:"outcome"`
	NoRetry bool   `json:"noRetry"`
	Error   string `json:"error"`
}

// callWorker POSTs the slot to one ready pod's trigger socket. notReady is a message
// when the Worker has no ready pod.
func (d *Dispatcher) callWorker(ctx context.Context, namespace, worker, cron string, slot time.Time, w *wave) (fleetv1alpha1.CronEvent, string) {
	ready, err := w.readyPods(ctx, d, namespace, worker)
	if err != nil {
		return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable, Message: err.Error()}, ""
	}
	if len(ready) == 0 {
		msg := noReadyPod(worker)
		return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable, Message: msg}, msg
	}
	return d.callPod(ctx, ready[rand.IntN(len(ready))], cron, slot), ""
}

func noReadyPod(worker string) string {
	return fmt.Sprintf("Worker %q has no ready pod (pods labelled %s=%s,%s=%s)", worker, podcontract.LabelWorker, worker, podcontract.LabelComponent, podcontract.ComponentWorker)
}

// triggerURL is pod's trigger socket endpoint path.
func (d *Dispatcher) triggerURL(pod *corev1.Pod, path string) string {
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(d.opts.TriggerPort)) + path
}

// callPod POSTs one run to pod's trigger socket (POST /scheduled).
func (d *Dispatcher) callPod(ctx context.Context, pod *corev1.Pod, cron string, slot time.Time) fleetv1alpha1.CronEvent {
	body, _ := json.Marshal(map[string]any{"cron": cron, "scheduledTime": slot.UnixMilli()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.triggerURL(pod, "/scheduled"), bytes.NewReader(body))
	if err != nil {
		return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable, Message: err.Error()}
	}
	req.Header.Set("content-type", "application/json")
	resp, err := d.trigger(req, pod)
	if err != nil {
		return d.callFailed(ctx, pod.Name, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var res triggerResult
	if err := json.Unmarshal(raw, &res); err != nil || resp.StatusCode != http.StatusOK || res.Outcome == "" {
		return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable,
			Message: fmt.Sprintf("pod %s: trigger socket answered %d %s", pod.Name, resp.StatusCode, truncate(string(raw), 200))}
	}
	return d.eventOf(pod.Name, res)
}

// trigger sends req to pod's trigger socket: over mutual TLS with the manager's
// certificate when the dispatcher has an Issuer, else plain HTTP.
func (d *Dispatcher) trigger(req *http.Request, pod *corev1.Pod) (*http.Response, error) {
	if d.opts.Issuer == nil {
		return d.opts.HTTPClient.Do(req)
	}
	hc, err := d.opts.Issuer.HTTPClient(req.Context(), pod.Namespace, 0)
	if err != nil {
		return nil, err
	}
	req.URL.Scheme = "https"
	return hc.Do(req)
}

// callFailed is the event of a trigger call that got no answer: past the wall time,
// cancelled, or unreachable.
func (d *Dispatcher) callFailed(ctx context.Context, pod string, err error) fleetv1alpha1.CronEvent {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeExceededWallTime,
			Message: fmt.Sprintf("pod %s: still running after the %s wall-time limit of Cron Triggers; request cancelled", pod, d.opts.WallTime)}
	}
	if ctx.Err() != nil {
		return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeException, Message: fmt.Sprintf("pod %s: cancelled: %v", pod, err)}
	}
	return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable, Message: fmt.Sprintf("pod %s: %v", pod, err)}
}

// eventOf maps the trigger socket's answer for one run to a history event.
func (d *Dispatcher) eventOf(pod string, res triggerResult) fleetv1alpha1.CronEvent {
	ev := fleetv1alpha1.CronEvent{NoRetry: res.NoRetry, Message: fmt.Sprintf("pod %s (dispatcher %s)", pod, d.opts.Identity)}
	switch res.Outcome {
	case "ok":
		ev.Outcome = fleetv1alpha1.CronOutcomeOK
	case "exceededCpu":
		ev.Outcome = fleetv1alpha1.CronOutcomeExceededCPU
	case "exception":
		ev.Outcome = fleetv1alpha1.CronOutcomeException
		if res.Error != "" {
			ev.Message += ": " + truncate(res.Error, 200)
		}
	default:
		ev.Outcome = fleetv1alpha1.CronOutcomeException
		ev.Message += ": workerd outcome " + res.Outcome
	}
	return ev
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// readyPods lists the ready pods of the Worker (common.ReadyPods), by name.
func (d *Dispatcher) readyPods(ctx context.Context, namespace, worker string) ([]*corev1.Pod, error) {
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(namespace),
		client.MatchingLabels{podcontract.LabelWorker: worker, podcontract.LabelComponent: podcontract.ComponentWorker}); err != nil {
		return nil, fmt.Errorf("list pods of Worker %q: %w", worker, err)
	}
	return common.ReadyPods(pods.Items), nil
}

func (d *Dispatcher) startWorkflow(ctx context.Context, namespace string, target fleetv1alpha1.CronTarget, cron string, slot time.Time) fleetv1alpha1.CronEvent {
	if d.opts.Workflows == nil {
		return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeUnreachable,
			Message: fmt.Sprintf("Workflow %q: the workflows engine is not available in this operator build yet", target.WorkflowRef.Name)}
	}
	id, err := d.opts.Workflows.StartScheduled(ctx, namespace, target.WorkflowRef.Name, target.Params, cron, slot)
	if err != nil {
		return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeException, Message: fmt.Sprintf("Workflow %q: %v", target.WorkflowRef.Name, err)}
	}
	return fleetv1alpha1.CronEvent{Outcome: fleetv1alpha1.CronOutcomeOK, Message: fmt.Sprintf("Workflow %q instance %s", target.WorkflowRef.Name, id)}
}

// record prepends ev to status.history (newest first, at most spec.historyLimit),
// updates the Ready condition and emits an Event. known, when not nil, is the object
// as last written by this dispatcher: the first attempt writes on it without reading
// (one request instead of two per dispatch); a conflict re-reads. It returns the
// object as written, or nil.
func (d *Dispatcher) record(ctx context.Context, key types.NamespacedName, ev fleetv1alpha1.CronEvent, notReady string, known *fleetv1alpha1.CronSchedule) *fleetv1alpha1.CronSchedule {
	var cs fleetv1alpha1.CronSchedule
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if known != nil {
			known.DeepCopyInto(&cs)
			known = nil
		} else if err := d.opts.APIReader.Get(ctx, key, &cs); err != nil {
			return err
		}
		limit := DefaultHistoryLimit
		if cs.Spec.HistoryLimit != nil {
			limit = int(*cs.Spec.HistoryLimit)
		}
		hist := append([]fleetv1alpha1.CronEvent{ev}, cs.Status.History...)
		sort.SliceStable(hist, func(i, j int) bool { return hist[i].ScheduledTime.After(hist[j].ScheduledTime.Time) })
		if len(hist) > limit {
			hist = hist[:limit]
		}
		cs.Status.History = hist
		cur := meta.FindStatusCondition(cs.Status.Conditions, fleetv1alpha1.ConditionReady)
		if !cs.Spec.Suspend && (cur == nil || cur.Reason != fleetv1alpha1.ReasonReferenceNotFound) {
			if notReady != "" {
				meta.SetStatusCondition(&cs.Status.Conditions, metav1.Condition{Type: fleetv1alpha1.ConditionReady,
					Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonTargetNotReady, Message: notReady, ObservedGeneration: cs.Generation})
			} else if ev.Outcome != fleetv1alpha1.CronOutcomeSkipped {
				meta.SetStatusCondition(&cs.Status.Conditions, metav1.Condition{Type: fleetv1alpha1.ConditionReady,
					Status: metav1.ConditionTrue, Reason: fleetv1alpha1.ReasonScheduled, ObservedGeneration: cs.Generation,
					Message: fmt.Sprintf("last slot %s of %q: %s", ev.ScheduledTime.UTC().Format(time.RFC3339), ev.Cron, ev.Outcome)})
			}
		}
		if err := d.c.Status().Update(ctx, &cs); err != nil {
			return err
		}
		d.remember(&cs)
		return nil
	})
	if err != nil {
		d.opts.Log.Error(err, "record cron event", "cronschedule", key, "cron", ev.Cron, "slot", ev.ScheduledTime)
		return nil
	}
	lg := d.opts.Log.WithValues("cronschedule", key, "cron", ev.Cron, "slot", ev.ScheduledTime.UTC().Format(time.RFC3339))
	if ev.Outcome == fleetv1alpha1.CronOutcomeOK {
		lg.V(1).Info("dispatched", "outcome", ev.Outcome, "message", ev.Message)
	} else {
		lg.Info("dispatch did not succeed", "outcome", ev.Outcome, "message", ev.Message)
	}
	if d.opts.Recorder != nil {
		kind, reason := corev1.EventTypeNormal, "Dispatched"
		if ev.Outcome != fleetv1alpha1.CronOutcomeOK {
			kind, reason = corev1.EventTypeWarning, "Dispatch"+upperFirst(string(ev.Outcome))
		}
		d.opts.Recorder.Eventf(&cs, nil, kind, reason, "Dispatch", "%q slot %s: %s %s", ev.Cron, ev.ScheduledTime.UTC().Format(time.RFC3339), ev.Outcome, ev.Message)
	}
	return &cs
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// setCondition sets Ready when it differs.
func (d *Dispatcher) setCondition(ctx context.Context, cs *fleetv1alpha1.CronSchedule, status metav1.ConditionStatus, reason, msg string) error {
	c := meta.FindStatusCondition(cs.Status.Conditions, fleetv1alpha1.ConditionReady)
	if c != nil && c.Status == status && c.Reason == reason && c.Message == msg && c.ObservedGeneration == cs.Generation {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var latest fleetv1alpha1.CronSchedule
		if err := d.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(cs), &latest); err != nil {
			return err
		}
		meta.SetStatusCondition(&latest.Status.Conditions, metav1.Condition{Type: fleetv1alpha1.ConditionReady,
			Status: status, Reason: reason, Message: msg, ObservedGeneration: latest.Generation})
		latest.Status.ObservedGeneration = latest.Generation
		if err := d.c.Status().Update(ctx, &latest); err != nil {
			return err
		}
		*cs = latest
		d.remember(cs)
		return nil
	})
	if err == nil && (c == nil || c.Status != status || c.Reason != reason || c.Message != msg) {
		d.readyChanged(ctx, cs, reason, msg)
	}
	return err
}

// readyChanged records a new Ready reason of cs as an Event and a log line: blocked on
// a missing target or a refused spec (Warning), suspended, or dispatching again.
func (d *Dispatcher) readyChanged(ctx context.Context, cs *fleetv1alpha1.CronSchedule, reason, msg string) {
	eventType := corev1.EventTypeNormal
	if reason == fleetv1alpha1.ReasonReferenceNotFound || reason == fleetv1alpha1.ReasonInvalidSpec {
		eventType, msg = corev1.EventTypeWarning, "blocked: "+msg
	}
	common.Events{Recorder: d.opts.Recorder}.Event(ctx, cs, eventType, reason, "Schedule", msg)
}
