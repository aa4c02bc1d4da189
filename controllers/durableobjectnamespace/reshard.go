package durableobjectnamespace

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// A change of spec.shards (docs/scaling.md) goes in two phases, each begun by a status
// write of its own before anything is done, so a manager that restarts mid-change
// carries on where it was:
//   - Stopping: the StatefulSet goes to 0 replicas; each shard pod drains, ships its last
//     changes and seals (its sidecar stops after workerd). Calls wait for their owner.
//   - Starting: the StatefulSet gets the new count; each pod's restore init container
//     hands over the objects it no longer owns and takes those it now owns from the
//     backup before workerd starts. Callers learn the new count from the gateways.
//
// At no instant do two shard sets run: the new one starts once no pod of the old one
// exists, so no object is ever served by two shards.

// nextReshardPhase decides whether the change of the shard count moves to a new phase
// (begins, or its old set is gone); then it returns the status to persist first.
func (r *Reconciler) nextReshardPhase(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace) (*fleetv1alpha1.ReshardStatus, error) {
	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: render.ShardSetName(d.Name)}, sts)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	cur := d.Status.Resharding
	if cur != nil {
		if err := r.checkUnsealed(ctx, d, cur); err != nil {
			return nil, err
		}
	}
	switch {
	case cur == nil:
		return beginReshard(d, sts)
	case cur.Phase == fleetv1alpha1.ReshardStopping:
		pods, err := common.ListPods(ctx, r.Client, d.Namespace, sts.Spec.Selector.MatchLabels)
		if err != nil || len(pods) > 0 || ptr.Deref(sts.Spec.Replicas, 1) != 0 || sts.Status.Replicas != 0 {
			return nil, err
		}
		next := *cur
		next.Phase, next.To, next.StoppedAt = fleetv1alpha1.ReshardStarting, d.SpecShards(), ptr.To(metav1.Now())
		return &next, nil
	}
	return nil, nil
}

// beginReshard starts a change when the live set serves another count than spec.shards.
func beginReshard(d *fleetv1alpha1.DurableObjectNamespace, sts *appsv1.StatefulSet) (*fleetv1alpha1.ReshardStatus, error) {
	live, want := ptr.Deref(sts.Spec.Replicas, 1), d.SpecShards()
	if live == 0 || live == want {
		return nil, nil
	}
	if d.Spec.Backup == nil {
		return nil, common.Blocked(fleetv1alpha1.ReasonInvalidSpec, fmt.Sprintf(
			"spec.shards: %d → %d needs spec.backup: objects move between shards through the namespace's backup (docs/scaling.md); the %d shards keep serving", live, want, live))
	}
	return &fleetv1alpha1.ReshardStatus{From: live, To: want, Phase: fleetv1alpha1.ReshardStopping,
		StartedAt: metav1.NewTime(time.Now().Truncate(time.Second)), Backup: d.Spec.Backup.DeepCopy()}, nil
}

// persistReshard writes next as status.resharding, alone, and records the decision.
func (r *Reconciler) persistReshard(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace, next *fleetv1alpha1.ReshardStatus) error {
	st := *d.Status.DeepCopy()
	st.Resharding = next
	msg := fmt.Sprintf("resharding from %d to %d shards: the %d shards stop, each shipping its last changes to the backup; calls wait for their object's shard", next.From, next.To, next.From)
	if next.Phase == fleetv1alpha1.ReshardStarting {
		msg = fmt.Sprintf("resharding from %d to %d shards: the old shards stopped after %s; the %d new ones take their objects from the backup", next.From, next.To, time.Since(next.StartedAt.Time).Round(time.Second), next.To)
	}
	log.FromContext(ctx).Info(msg, "phase", next.Phase)
	r.Events.Event(ctx, d, corev1.EventTypeNormal, fleetv1alpha1.ReasonResharding, "Reshard", msg)
	return common.WriteStatus(ctx, r.Client, d, &d.Status, st)
}

// finishReshard ends a change once every shard of the new set is ready at its revision.
func (r *Reconciler) finishReshard(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace, st *fleetv1alpha1.DurableObjectNamespaceStatus) {
	cur := st.Resharding
	if cur == nil || cur.Phase != fleetv1alpha1.ReshardStarting {
		return
	}
	done := *cur
	done.Phase, done.FinishedAt, done.Backup = "", ptr.To(metav1.Now()), nil
	st.Resharding, st.LastReshard, st.ServedShards = nil, &done, done.To
	msg := fmt.Sprintf("resharded from %d to %d shards in %s", done.From, done.To, done.FinishedAt.Sub(done.StartedAt.Time).Round(time.Second))
	if done.StoppedAt != nil {
		msg += fmt.Sprintf(" (the old set stopped in %s, the new one started in %s)",
			done.StoppedAt.Sub(done.StartedAt.Time).Round(time.Second), done.FinishedAt.Sub(done.StoppedAt.Time).Round(time.Second))
	}
	log.FromContext(ctx).Info(msg)
	r.Events.Event(ctx, d, corev1.EventTypeNormal, fleetv1alpha1.ReasonResharded, "Reshard", msg)
}

// checkUnsealed refuses a bad unsealed-shards annotation and records, as a Warning,
// the shards a change goes on without (their last writes are lost).
func (r *Reconciler) checkUnsealed(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace, cur *fleetv1alpha1.ReshardStatus) error {
	waived, err := d.UnsealedShards(cur.From)
	if err != nil {
		return common.Blocked(fleetv1alpha1.ReasonInvalidSpec, err.Error()+" (docs/scaling.md)")
	}
	if len(waived) > 0 {
		msg := fmt.Sprintf("resharding from %d to %d shards without the seals of shards %v: their objects move as of their last shipped state, losing the writes they acknowledged after it", cur.From, cur.To, waived)
		log.FromContext(ctx).Info(msg)
		r.Events.Event(ctx, d, corev1.EventTypeWarning, fleetv1alpha1.ReasonResharding, "Reshard", msg)
	}
	return nil
}
