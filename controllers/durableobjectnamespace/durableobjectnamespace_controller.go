// Package durableobjectnamespace reconciles a DurableObjectNamespace into a StatefulSet
// of shard pods (a PVC each), a headless Service and the shard pods' ConfigMap.
package durableobjectnamespace

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// Reconciler reconciles a DurableObjectNamespace into a StatefulSet of spec.shards
// shard pods (PVC each), a headless Service and the shard pods' ConfigMap.
type Reconciler struct {
	client.Client
	Options specs.Options
	Events  common.Events
	// Refs reads the ConfigMaps and Secrets the operator does not label.
	Refs *common.References
	// APIReader reads uncached the claims, volumes and Nodes of a pod that cannot be
	// scheduled (common.MoveStrandedVolumes): no informer on every Node and volume.
	APIReader client.Reader
	backoff   *common.Backoff
}

// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=durableobjectnamespaces,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=durableobjectnamespaces/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=durableobjectnamespaces/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch

// Reconcile fetches the namespace, renders the shard pods from its Worker, applies the
// children and writes the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	d := &fleetv1alpha1.DurableObjectNamespace{}
	if err := r.Get(ctx, req.NamespacedName, d); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !d.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	next, err := r.nextReshardPhase(ctx, d)
	if next != nil {
		return ctrl.Result{Requeue: true}, r.persistReshard(ctx, d, next)
	}
	var sts *appsv1.StatefulSet
	if err == nil {
		sts, err = r.reconcileChildren(ctx, d)
	}
	pods, perr := common.ListPods(ctx, r.Client, d.Namespace, specs.DONSSelector(d))
	if err == nil {
		err = perr
	}
	if err := r.Events.MoveStrandedVolumes(ctx, r.Client, r.APIReader, d, common.BackupHolds(d.Spec.Backup, d.Status.Backup, d.BackupPath()), pods); err != nil {
		log.FromContext(ctx).Error(err, "move the volumes of pods pinned to a lost or drained node")
	}
	base := *d.Status.DeepCopy()
	if err == nil && allReady(d, sts) {
		r.finishReshard(ctx, d, &base)
	}
	st := computeStatus(d, base, sts, pods, err)
	st.Backup = r.Events.Backup(ctx, r.Client, r.Options, d, d.Spec.Backup, d.BackupPath(), d.Status.Backup, sts, pods)
	r.Events.Transitions(ctx, d, d.Status.Conditions, st.Conditions)
	if err := common.WriteStatus(ctx, r.Client, d, &d.Status, st); err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.backoff.Result(ctx, req.NamespacedName, err)
	if err == nil && d.Spec.Backup != nil && res.RequeueAfter == 0 {
		res.RequeueAfter = common.BackupStatusInterval
	}
	return res, err
}

// reconcileChildren renders the shard pods from the Worker (with every sibling it
// binds), applies the ConfigMap, the Service and the StatefulSet, and prunes older
// ConfigMaps. It returns the live StatefulSet.
func (r *Reconciler) reconcileChildren(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace) (*appsv1.StatefulSet, error) {
	w, err := common.WorkerRef(ctx, r.Client, r.Refs.Live, d.Namespace, d.Spec.WorkerRef.Name)
	if err != nil {
		return nil, err
	}
	if err := common.CheckBackup(ctx, r.Refs.Meta, d.Namespace, "spec", specs.DONSBackup(d)); err != nil {
		return nil, err
	}
	out, inputsHash, err := common.RenderWorker(ctx, r.Client, r.Refs, r.Options, w, d, nil)
	if err != nil {
		return nil, err
	}
	set := specs.BuildDONSChildren(d, w, out, inputsHash, r.Options)
	return common.ApplyShardSet(ctx, r.Client, r.Events, d, specs.DONSSelector(d), set, r.Options.NetworkPolicies)
}

// computeStatus is the one place the status is computed: uniqueKey (fixed once
// set), shard counts from the StatefulSet, Degraded/lastFailure from the shard pods
// (failure.ClassifyPods), Ready when every shard is ready and runs the current revision.
func computeStatus(d *fleetv1alpha1.DurableObjectNamespace, st fleetv1alpha1.DurableObjectNamespaceStatus, sts *appsv1.StatefulSet, pods []corev1.Pod, err error) fleetv1alpha1.DurableObjectNamespaceStatus {
	gen := d.Generation
	if st.UniqueKey == "" {
		st.UniqueKey = render.UniqueKey(d)
	}
	if common.SetPassConditions(&st.Conditions, &st.LastFailure, gen, pods, nil, err) {
		return st
	}
	desired := d.ShardSetReplicas()
	if st.Resharding == nil && d.Status.Resharding != nil {
		desired = d.ShardSetShards() // the change just finished
	}
	st.ObservedGeneration = gen
	st.Shards = sts.Status.Replicas
	st.ReadyShards = sts.Status.ReadyReplicas
	c := common.Conditions{List: &st.Conditions, Generation: gen}
	current := sts.Status.ObservedGeneration >= sts.Generation &&
		(sts.Status.UpdateRevision == "" || sts.Status.CurrentRevision == sts.Status.UpdateRevision) &&
		sts.Status.UpdatedReplicas == desired
	switch {
	case st.Resharding != nil:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonResharding,
			fmt.Sprintf("resharding from %d to %d shards (%s): %d of %d shards ready; calls wait for their object's shard", st.Resharding.From, st.Resharding.To, st.Resharding.Phase, st.ReadyShards, desired),
			metav1.ConditionTrue, fleetv1alpha1.ReasonResharding, "moving objects to the new shard count")
	case current && st.ReadyShards == desired && st.Shards == desired:
		st.ServedShards = desired
		c.SetReady(metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled, fmt.Sprintf("all %d shards are ready", desired),
			metav1.ConditionFalse, fleetv1alpha1.ReasonRolloutComplete, "rollout complete")
	case !current:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonRollingOut,
			fmt.Sprintf("rolling out the current version: %d of %d shards ready; objects of a shard that is not ready are refused", st.ReadyShards, desired),
			metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "rolling out the current version")
	default:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonPodsUnavailable,
			fmt.Sprintf("%d of %d shards ready; objects of a shard that is not ready are refused", st.ReadyShards, desired),
			metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "waiting for shards to become ready")
	}
	return st
}

// allReady: the StatefulSet runs its current revision on every one of its shards.
func allReady(d *fleetv1alpha1.DurableObjectNamespace, sts *appsv1.StatefulSet) bool {
	n := d.ShardSetReplicas()
	return sts != nil && sts.Status.ObservedGeneration >= sts.Generation && n > 0 &&
		(sts.Status.UpdateRevision == "" || sts.Status.CurrentRevision == sts.Status.UpdateRevision) &&
		sts.Status.UpdatedReplicas == n && sts.Status.ReadyReplicas == n && sts.Status.Replicas == n
}

// SetupWithManager registers the reconciler and its watches: owned children, the
// shard pods (for Degraded), and everything the shards' rendering reads: the Worker
// named by spec.workerRef and every object that Worker references, siblings included
// (common.WatchWorkerReaders).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.backoff = common.NewBackoff()
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.DurableObjectNamespace{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(common.PodOwner(podcontract.LabelDONS, podcontract.ComponentDOShard)))
	return common.WatchWorkerReaders[fleetv1alpha1.DurableObjectNamespaceList](b, r.Client, r.Refs).
		Named("durableobjectnamespace").
		WithOptions(controller.Options{MaxConcurrentReconciles: common.MaxConcurrentReconciles}).
		Complete(r)
}
