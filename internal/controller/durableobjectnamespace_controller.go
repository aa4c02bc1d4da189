package controller

import (
	"context"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// indexDONSWorkerRef indexes DurableObjectNamespaces by spec.workerRef.name.
const indexDONSWorkerRef = ".spec.workerRef.name"

// DurableObjectNamespaceReconciler reconciles a DurableObjectNamespace into a
// StatefulSet of spec.shards shard pods (PVC each), a headless Service and the shard
// pods' ConfigMap.
type DurableObjectNamespaceReconciler struct {
	client.Client
	Scheme  *runtime.Scheme
	Options Options
}

// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=durableobjectnamespaces,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=durableobjectnamespaces/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=durableobjectnamespaces/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete

// Reconcile fetches the namespace, renders the shard pods from its Worker, applies the
// children and writes the status once.
func (r *DurableObjectNamespaceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	d := &fleetv1alpha1.DurableObjectNamespace{}
	if err := r.Get(ctx, req.NamespacedName, d); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !d.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	sts, err := r.reconcileChildren(ctx, d)
	pods, perr := r.listPods(ctx, d)
	if err == nil {
		err = perr
	}
	st := computeDONSStatus(d, sts, pods, err)
	if serr := r.writeStatus(ctx, d, st); serr != nil {
		return ctrl.Result{}, serr
	}
	return passResult(ctx, err)
}

func (r *DurableObjectNamespaceReconciler) reconcileChildren(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace) (*appsv1.StatefulSet, error) {
	w, err := workerRef(ctx, r.Client, d.Namespace, d.Spec.WorkerRef.Name)
	if err != nil {
		return nil, err
	}
	out, inputsHash, err := renderWorker(ctx, r.Client, r.Options, w, d, nil)
	if err != nil {
		return nil, err
	}
	children := BuildDONSChildren(d, w, out, inputsHash, r.Options)
	for _, obj := range []client.Object{children.ConfigMap, children.Service, children.StatefulSet} {
		if err := applyObject(ctx, r.Client, obj); err != nil {
			return nil, fmt.Errorf("apply %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	if err := r.pruneConfigMaps(ctx, d, children.ConfigMap.Name); err != nil {
		return nil, err
	}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(children.StatefulSet), sts); err != nil {
		return nil, err
	}
	return sts, nil
}

// pruneConfigMaps deletes the shard ConfigMaps of older versions.
func (r *DurableObjectNamespaceReconciler) pruneConfigMaps(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace, current string) error {
	return deleteOwnedConfigMaps(ctx, r.Client, d, client.MatchingLabels(donsSelector(d)), map[string]bool{current: true})
}

func (r *DurableObjectNamespaceReconciler) listPods(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingLabels(donsSelector(d))); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (r *DurableObjectNamespaceReconciler) writeStatus(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace, st fleetv1alpha1.DurableObjectNamespaceStatus) error {
	if reflect.DeepEqual(d.Status, st) {
		return nil
	}
	d.Status = st
	return r.Status().Update(ctx, d)
}

// computeDONSStatus is the one place the status is computed: uniqueKey (fixed once
// set), shard counts from the StatefulSet, Degraded/lastFailure from the shard pods
// (failure.ClassifyPods), Ready when every shard is ready and runs the current revision.
func computeDONSStatus(d *fleetv1alpha1.DurableObjectNamespace, sts *appsv1.StatefulSet, pods []corev1.Pod, err error) fleetv1alpha1.DurableObjectNamespaceStatus {
	st := *d.Status.DeepCopy()
	gen := d.Generation
	if st.UniqueKey == "" {
		st.UniqueKey = render.UniqueKey(d)
	}
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	if setPassConditions(&st.Conditions, &st.LastFailure, gen, pods, err) {
		return st
	}
	desired := render.Shards(d)
	st.ObservedGeneration = gen
	st.Shards = sts.Status.Replicas
	st.ReadyShards = sts.Status.ReadyReplicas
	current := sts.Status.ObservedGeneration >= sts.Generation &&
		(sts.Status.UpdateRevision == "" || sts.Status.CurrentRevision == sts.Status.UpdateRevision) &&
		sts.Status.UpdatedReplicas == desired
	switch {
	case current && st.ReadyShards == desired && st.Shards == desired:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled, fmt.Sprintf("all %d shards are ready", desired))
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, fleetv1alpha1.ReasonRolloutComplete, "rollout complete")
	case !current:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonRollingOut,
			fmt.Sprintf("rolling out the current version: %d of %d shards ready; objects of a shard that is not ready are refused", st.ReadyShards, desired))
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "rolling out the current version")
	default:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonPodsUnavailable,
			fmt.Sprintf("%d of %d shards ready; objects of a shard that is not ready are refused", st.ReadyShards, desired))
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "waiting for shards to become ready")
	}
	return st
}

// SetupWithManager registers the reconciler, its index and its watches: owned
// children, the Worker named by spec.workerRef (its code is the shards' code) and the
// shard pods (for Degraded).
func (r *DurableObjectNamespaceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &fleetv1alpha1.DurableObjectNamespace{}, indexDONSWorkerRef, func(o client.Object) []string {
		return []string{o.(*fleetv1alpha1.DurableObjectNamespace).Spec.WorkerRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.DurableObjectNamespace{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleetv1alpha1.Worker{}, handler.EnqueueRequestsFromMapFunc(referencing[fleetv1alpha1.DurableObjectNamespaceList](r.Client, indexDONSWorkerRef)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podOwner(podcontract.LabelDONS, podcontract.ComponentDOShard))).
		Named("durableobjectnamespace").
		Complete(r)
}
