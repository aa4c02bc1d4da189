package cronschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Claim-ahead (docs/cron.md "Claiming ahead").
//
// Claiming a slot is one optimistic-concurrency status write per CronSchedule. Done as
// the slot comes due, a thousand CronSchedules on the same minute wait for a thousand
// writes before the last is dispatched (seconds of lateness). With claim-ahead the
// dispatcher claims the upcoming slot up to ClaimAhead before it is due, writing
// status.schedules[].claimedAheadBy = its identity, and keeps the claim in memory. At
// the slot it makes one write for all of them: it advances its entry in the dispatch
// record (a Lease) to the slot ("confirms" it), then dispatches every claim of that
// slot at once.
//
// A claim ahead whose dispatcher dies before confirming it must not be lost, and one
// it confirmed must not run twice. When a dispatcher starts leading it registers in
// the record and fences every other entry there (the write is the record's
// resourceVersion compare-and-swap, so a fenced dispatcher can never confirm again).
// A slot claimed ahead by a fenced dispatcher and later than that dispatcher's last
// confirmation was never dispatched: the new leader claims it again (clearing or
// replacing claimedAheadBy, a compare-and-swap on the CronSchedule) and dispatches it,
// late if it has passed. Everything at or before the last confirmation was dispatched.

// DispatchRecordAnnotation holds the dispatch record on its Lease: JSON
// {"<identity>": {"through": RFC 3339 time, "fenced": bool}}.
const DispatchRecordAnnotation = "fleet.workerd-operator.io/cron-dispatch-record"

// DefaultClaimAhead is DispatcherOptions.ClaimAhead's default: long enough for a
// thousand claim writes on a small control plane (docs/benchmarks.md, cron lateness).
const DefaultClaimAhead = 10 * time.Second

// maxRecordEntries bounds the dispatch record; the oldest fenced entries go first. A
// claim of a dispatcher no longer in the record counts as dispatched (at most once):
// by then every leader since has processed it.
const maxRecordEntries = 16

// recordEntry is one dispatcher's line in the dispatch record.
type recordEntry struct {
	// Through: every slot this dispatcher claimed ahead at or before it was dispatched.
	Through time.Time `json:"through"`
	// Fenced: another dispatcher took over; this one may confirm nothing more.
	Fenced bool `json:"fenced,omitempty"`
}

type dispatchRecord map[string]recordEntry

// reservation is one slot claimed ahead and not yet dispatched.
type reservation struct {
	key  types.NamespacedName
	uid  types.UID // a CronSchedule deleted and recreated under the same name is another
	cron string
	slot time.Time
}

// ahead holds the claim-ahead state of a Dispatcher.
type ahead struct {
	mu         sync.Mutex
	id         string // identity in the record; a new one after being fenced
	term       int
	registered bool
	fenced     bool                  // this dispatcher has fenced the others once (its first registration)
	lease      *coordinationv1.Lease // as last read or written
	record     dispatchRecord
	pending    map[reservation]bool
}

func (d *Dispatcher) claimAheadEnabled() bool {
	return d.opts.DispatchRecord.Name != "" && d.opts.ClaimAhead > 0
}

// pendingHas reports whether this dispatcher holds the claim ahead of (cs, cron, slot).
func (d *Dispatcher) pendingHas(cs *fleetv1alpha1.CronSchedule, cron string, slot time.Time) bool {
	d.ah.mu.Lock()
	defer d.ah.mu.Unlock()
	return d.ah.pending[reservation{client.ObjectKeyFromObject(cs), cs.UID, cron, slot.UTC()}]
}

func (d *Dispatcher) addPending(cs *fleetv1alpha1.CronSchedule, cron string, slot time.Time) {
	d.ah.mu.Lock()
	defer d.ah.mu.Unlock()
	d.ah.pending[reservation{client.ObjectKeyFromObject(cs), cs.UID, cron, slot.UTC()}] = true
}

// earliestPending is the earliest slot claimed ahead and not dispatched (zero if none).
func (d *Dispatcher) earliestPending() time.Time {
	d.ah.mu.Lock()
	defer d.ah.mu.Unlock()
	var t time.Time
	for r := range d.ah.pending {
		if t.IsZero() || r.slot.Before(t) {
			t = r.slot
		}
	}
	return t
}

// identity is the name this dispatcher claims under.
func (d *Dispatcher) identity() string {
	d.ah.mu.Lock()
	defer d.ah.mu.Unlock()
	return d.ah.id
}

// inDoubt reports whether st's lastScheduleTime is a claim ahead that its dispatcher
// never dispatched and never will: the dispatcher is fenced in rec and its last
// confirmation is before the slot.
func (d *Dispatcher) inDoubt(rec dispatchRecord, st *fleetv1alpha1.CronScheduleState) bool {
	if st == nil || st.LastScheduleTime == nil || st.ClaimedAheadBy == "" {
		return false
	}
	e, ok := rec[st.ClaimedAheadBy]
	return ok && e.Fenced && st.LastScheduleTime.Time.After(e.Through)
}

// readRecord reads the dispatch record (uncached) and registers this dispatcher in it
// when its entry is missing: on its first pass, where it also fences every other entry
// (it has just become the leader), and again if the record was deleted or pruned, then
// keeping its claims. A dispatcher found fenced drops its claims (the fencer dispatches
// them) and registers under a new identity, fencing no one: only a new leader fences.
// It returns the record to judge claims by. Errors: the API server's.
func (d *Dispatcher) readRecord(ctx context.Context) (dispatchRecord, error) {
	for attempt := 0; ; attempt++ {
		lease, rec, err := d.getRecord(ctx)
		if err != nil {
			return nil, err
		}
		d.ah.mu.Lock()
		if mine, ok := rec[d.ah.id]; d.ah.registered && ok && mine.Fenced {
			d.opts.Log.Info("cron dispatcher was fenced by another dispatcher; dropping its claims ahead", "identity", d.ah.id, "dropped", len(d.ah.pending))
			d.ah.pending = map[reservation]bool{}
			d.ah.term++
			d.ah.id = fmt.Sprintf("%s-%d", d.opts.Identity, d.ah.term)
		} else if ok {
			d.ah.registered, d.ah.lease, d.ah.record = true, lease, rec
			d.ah.mu.Unlock()
			return rec, nil
		}
		id, fence := d.ah.id, !d.ah.fenced
		// Our confirmations so far are gone with the entry: count only what is
		// before every claim we still hold as confirmed.
		through := d.opts.Now().UTC()
		for r := range d.ah.pending {
			if !r.slot.After(through) {
				through = r.slot.Add(-time.Nanosecond).UTC()
			}
		}
		d.ah.mu.Unlock()
		next := dispatchRecord{}
		for k, e := range rec {
			e.Fenced = e.Fenced || fence
			next[k] = e
		}
		next[id] = recordEntry{Through: through}
		written, err := d.writeRecord(ctx, lease, next, id)
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cron: register in dispatch record %s: %w", d.opts.DispatchRecord, err)
		}
		d.ah.mu.Lock()
		d.ah.registered, d.ah.fenced, d.ah.lease, d.ah.record = true, true, written, next
		d.ah.mu.Unlock()
		return next, nil
	}
}

func (d *Dispatcher) getRecord(ctx context.Context) (*coordinationv1.Lease, dispatchRecord, error) {
	var lease coordinationv1.Lease
	err := d.opts.APIReader.Get(ctx, d.opts.DispatchRecord, &lease)
	if apierrors.IsNotFound(err) {
		return nil, dispatchRecord{}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cron: read dispatch record %s: %w", d.opts.DispatchRecord, err)
	}
	rec := dispatchRecord{}
	if raw := lease.Annotations[DispatchRecordAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return nil, nil, fmt.Errorf("cron: dispatch record %s: annotation %s: %w", d.opts.DispatchRecord, DispatchRecordAnnotation, err)
		}
	}
	return &lease, rec, nil
}

// writeRecord stores rec on lease (creating it when nil) with optimistic concurrency,
// keeping at most maxRecordEntries entries (never dropping keep's).
func (d *Dispatcher) writeRecord(ctx context.Context, lease *coordinationv1.Lease, rec dispatchRecord, keep string) (*coordinationv1.Lease, error) {
	if len(rec) > maxRecordEntries {
		var fenced []string
		for k, e := range rec {
			if e.Fenced && k != keep {
				fenced = append(fenced, k)
			}
		}
		sort.Slice(fenced, func(i, j int) bool { return rec[fenced[i]].Through.Before(rec[fenced[j]].Through) })
		for _, k := range fenced[:min(len(fenced), len(rec)-maxRecordEntries)] {
			delete(rec, k)
		}
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	now := metav1.NewMicroTime(d.opts.Now())
	if lease == nil {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: d.opts.DispatchRecord.Namespace, Name: d.opts.DispatchRecord.Name,
			Annotations: map[string]string{DispatchRecordAnnotation: string(raw)}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &keep, RenewTime: &now}}
		return lease, d.c.Create(ctx, lease)
	}
	lease = lease.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[DispatchRecordAnnotation] = string(raw)
	lease.Spec.HolderIdentity, lease.Spec.RenewTime = &keep, &now
	return lease, d.c.Update(ctx, lease)
}

// confirm advances this dispatcher's entry to slot (compare-and-swap on the record).
// It reports false when this dispatcher has been fenced: its claims are no longer its
// to dispatch. Errors: the API server's (the claims stay pending and are retried).
func (d *Dispatcher) confirm(ctx context.Context, slot time.Time) (bool, error) {
	for attempt := 0; attempt < 5; attempt++ {
		d.ah.mu.Lock()
		lease, id := d.ah.lease, d.ah.id
		rec := dispatchRecord{}
		for k, e := range d.ah.record {
			rec[k] = e
		}
		d.ah.mu.Unlock()
		e, ok := rec[id]
		switch {
		case !ok:
			// The record was deleted or pruned: not fenced. Keep the claims; the next
			// pass registers again under this identity and confirms them then.
			return false, fmt.Errorf("cron: confirm slot %s: no entry for %s in dispatch record %s (deleted?); retrying after registering again", slot.UTC().Format(time.RFC3339), id, d.opts.DispatchRecord)
		case e.Fenced:
			return false, nil
		case !slot.After(e.Through):
			return true, nil
		}
		rec[id] = recordEntry{Through: slot.UTC()}
		written, err := d.writeRecord(ctx, lease, rec, id)
		if err == nil {
			d.ah.mu.Lock()
			d.ah.lease, d.ah.record = written, rec
			d.ah.mu.Unlock()
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			// NotFound (the Lease was deleted) too: the next pass's readRecord
			// registers again and keeps the claims.
			return false, fmt.Errorf("cron: confirm slot %s in dispatch record %s: %w", slot.UTC().Format(time.RFC3339), d.opts.DispatchRecord, err)
		}
		fresh, frec, err := d.getRecord(ctx)
		if err != nil {
			return false, err
		}
		d.ah.mu.Lock()
		d.ah.lease, d.ah.record = fresh, frec
		d.ah.mu.Unlock()
	}
	return false, fmt.Errorf("cron: confirm slot %s in dispatch record %s: still conflicting after 5 attempts", slot.UTC().Format(time.RFC3339), d.opts.DispatchRecord)
}

// dispatchDue confirms and dispatches every claim ahead whose slot is at or before
// now, oldest slot first. It returns the last wave it dispatched (nil if none).
func (d *Dispatcher) dispatchDue(ctx context.Context, now time.Time) (*wave, error) {
	if !d.claimAheadEnabled() || ctx.Err() != nil {
		return nil, nil
	}
	bySlot, slots := d.duePending(now)
	var last *wave
	for _, slot := range slots {
		ok, err := d.confirm(ctx, slot)
		if err != nil {
			return last, err
		}
		d.ah.mu.Lock()
		for _, r := range bySlot[slot] {
			delete(d.ah.pending, r)
		}
		d.ah.mu.Unlock()
		if !ok {
			d.opts.Log.Info("cron dispatcher fenced before confirming its claims ahead; the new leader dispatches them", "slot", slot, "claims", len(bySlot[slot]))
			continue
		}
		last = d.dispatchWave(ctx, bySlot[slot])
	}
	return last, nil
}

// duePending groups the pending claims ahead due at now by slot, and lists the slots
// oldest first.
func (d *Dispatcher) duePending(now time.Time) (map[time.Time][]reservation, []time.Time) {
	d.ah.mu.Lock()
	bySlot := map[time.Time][]reservation{}
	for r := range d.ah.pending {
		if !r.slot.After(now) {
			bySlot[r.slot] = append(bySlot[r.slot], r)
		}
	}
	d.ah.mu.Unlock()
	slots := make([]time.Time, 0, len(bySlot))
	for s := range bySlot {
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Before(slots[j]) })
	return bySlot, slots
}

// dispatchWave dispatches the confirmed claims of one slot as one wave: the runs of
// one Worker that may share a request in a batch, the others one by one.
func (d *Dispatcher) dispatchWave(ctx context.Context, rs []reservation) *wave {
	w := newWave(len(rs), waveHold)
	current := d.currentSchedules(ctx)
	groups := map[types.NamespacedName][]batchRun{}
	for _, r := range rs {
		if cs := current[r.key]; batchable(cs) {
			if cur, ok := d.stillDue(cs, r); ok {
				worker := types.NamespacedName{Namespace: r.key.Namespace, Name: cur.Spec.Target.WorkerRef.Name}
				groups[worker] = append(groups[worker], batchRun{cs: cur, r: r})
			} else {
				w.started()
			}
			continue
		}
		// In parallel: each reads its CronSchedule first, and the last of a
		// thousand should not wait for the others' reads.
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.dispatchClaimed(ctx, r, current[r.key], w)
		}()
	}
	for worker, runs := range groups {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.dispatchBatch(ctx, worker, runs, w)
		}()
	}
	return w
}

// currentSchedules lists the CronSchedules once for a wave, as the read-only objects
// the cache holds (no copy per dispatch). Nil on error (each dispatch then reads its
// own).
func (d *Dispatcher) currentSchedules(ctx context.Context) map[types.NamespacedName]*fleetv1alpha1.CronSchedule {
	var list fleetv1alpha1.CronScheduleList
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if d.opts.Namespace != "" {
		opts = append(opts, client.InNamespace(d.opts.Namespace))
	}
	if err := d.c.List(ctx, &list, opts...); err != nil {
		d.opts.Log.Error(err, "list CronSchedules for a wave")
		return nil
	}
	m := make(map[types.NamespacedName]*fleetv1alpha1.CronSchedule, len(list.Items))
	for i := range list.Items {
		m[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
	return m
}

// dispatchClaimed dispatches a confirmed claim ahead, against the CronSchedule as it
// is now (listed: from currentSchedules, never modified; nil: read it): a CronSchedule
// deleted, suspended or no longer listing the expression since the claim is not
// dispatched.
func (d *Dispatcher) dispatchClaimed(ctx context.Context, r reservation, listed *fleetv1alpha1.CronSchedule, w *wave) {
	if listed == nil {
		var cs fleetv1alpha1.CronSchedule
		if err := d.c.Get(ctx, r.key, &cs); err != nil {
			w.started()
			if !apierrors.IsNotFound(err) {
				d.opts.Log.Error(err, "read CronSchedule for a claimed slot; not dispatched", "cronschedule", r.key, "slot", r.slot)
			}
			return
		}
		listed = &cs
	}
	cur, ok := d.stillDue(listed, r)
	if !ok {
		w.started()
		return
	}
	d.dispatchIn(ctx, cur, r.cron, r.slot, w)
}

// stillDue returns the newest copy of listed and whether the claim r should still be
// dispatched: not if the CronSchedule is another object under the same name, is being
// deleted, is suspended, no longer lists the expression, or no longer carries our
// claim (its status lost it, or another dispatcher took it over).
func (d *Dispatcher) stillDue(listed *fleetv1alpha1.CronSchedule, r reservation) (*fleetv1alpha1.CronSchedule, bool) {
	cur := d.freshest(listed)
	has := false
	for _, s := range cur.Spec.Schedules {
		has = has || s == r.cron
	}
	st := stateOf(cur, r.cron)
	ours := st != nil && st.LastScheduleTime != nil && st.LastScheduleTime.Time.Equal(r.slot) && st.ClaimedAheadBy == d.identity()
	return cur, cur.UID == r.uid && cur.DeletionTimestamp == nil && !cur.Spec.Suspend && has && ours
}

// waveHold bounds how long a wave holds its runs' history writes.
const waveHold = 2 * time.Second

// wave is the set of runs dispatched together at one slot. Their history writes (one
// status write each) wait until every run of the wave has had its answer from the
// pod, or waveHold has passed: a thousand writes through the API server at the moment
// a thousand scheduled() handlers start would compete with them for the same cores
// (docs/benchmarks.md, cron lateness). A nil *wave holds nothing.
type wave struct {
	left atomic.Int64
	done chan struct{}
	once sync.Once
	pods sync.Map // "<namespace>/<worker>" -> *wavePods
}

// wavePods is one Worker's ready pods, listed once per wave.
type wavePods struct {
	once  sync.Once
	ready []*corev1.Pod
	err   error
}

// readyPods lists the Worker's ready pods once for the whole wave (every time for a
// nil wave).
func (w *wave) readyPods(ctx context.Context, d *Dispatcher, namespace, worker string) ([]*corev1.Pod, error) {
	if w == nil {
		return d.readyPods(ctx, namespace, worker)
	}
	v, _ := w.pods.LoadOrStore(namespace+"/"+worker, &wavePods{})
	p := v.(*wavePods)
	p.once.Do(func() { p.ready, p.err = d.readyPods(ctx, namespace, worker) })
	return p.ready, p.err
}

func newWave(n int, hold time.Duration) *wave {
	w := &wave{done: make(chan struct{})}
	w.left.Store(int64(n))
	if n == 0 {
		w.close()
	}
	time.AfterFunc(hold, w.close)
	return w
}

func (w *wave) close() { w.once.Do(func() { close(w.done) }) }

// started marks one run of the wave as answered (or not dispatched).
func (w *wave) started() {
	if w != nil && w.left.Add(-1) == 0 {
		w.close()
	}
}

// wait blocks until the whole wave is answered or its hold has passed.
func (w *wave) wait() {
	if w != nil {
		<-w.done
	}
}

// claimAheadOf claims the upcoming slot of e when it is at most ClaimAhead away and
// not already held, and returns the next slot still to claim.
func (d *Dispatcher) claimAheadOf(ctx context.Context, cs *fleetv1alpha1.CronSchedule, e expression, rec dispatchRecord, loc *time.Location, now time.Time) (time.Time, error) {
	n := e.sched.Next(now, loc)
	if n.IsZero() || n.Sub(now) > d.opts.ClaimAhead {
		return n, nil
	}
	if d.pendingHas(cs, e.text, n) {
		return e.sched.Next(n, loc), nil
	}
	ok, _, err := d.claimSlot(ctx, cs, e, loc, n, d.identity(), rec)
	if err != nil {
		return n, err
	}
	if ok {
		d.addPending(cs, e.text, n)
	}
	return e.sched.Next(n, loc), nil
}
