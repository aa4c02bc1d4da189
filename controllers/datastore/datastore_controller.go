// Package datastore reconciles KVNamespaces, D1Databases and Queues, each into the
// one-pod StatefulSet hosting it (docs/kv.md, docs/d1.md, docs/queues.md). One
// reconciler serves the three kinds: they differ only in what the host runs.
package datastore

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

// Reconciler reconciles the data stores of one Kind.
type Reconciler struct {
	client.Client
	Options specs.Options
	Events  common.Events
	// Refs reads the ConfigMaps and Secrets the operator does not label.
	Refs *common.References
	// APIReader reads uncached the claims, volumes and Nodes of a pod that cannot be
	// scheduled (common.MoveStrandedVolumes): no informer on every Node and volume.
	APIReader client.Reader
	Kind      render.DataKind
	backoff   *common.Backoff
}

// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=kvnamespaces;d1databases;queues,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=kvnamespaces/status;d1databases/status;queues/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=kvnamespaces/finalizers;d1databases/finalizers;queues/finalizers,verbs=update

// Reconcile fetches the store, renders and applies its host and writes the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := r.newStore()
	if err := r.Get(ctx, req.NamespacedName, s.obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	sts, err := r.reconcileChildren(ctx, s)
	pods, perr := common.ListPods(ctx, r.Client, req.Namespace, specs.DataStoreSelector(r.Kind, req.Name))
	if err == nil {
		err = perr
	}
	if err := r.Events.MoveStrandedVolumes(ctx, r.Client, r.APIReader, s.obj, common.BackupHolds(s.backup.Backup, s.status.Backup, s.backup.Path), pods); err != nil {
		log.FromContext(ctx).Error(err, "move the volume of a pod pinned to a lost or drained node")
	}
	st := computeStatus(s.obj.GetGeneration(), *s.status, sts, pods, err)
	st.Backup = r.Events.Backup(ctx, r.Client, r.Options, s.obj, s.backup.Backup, s.backup.Path, s.status.Backup, sts, pods)
	r.Events.Transitions(ctx, s.obj, s.status.Conditions, st.Conditions)
	if err := s.write(ctx, r.Client, st); err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.backoff.Result(ctx, req.NamespacedName, err)
	if err == nil && s.backup.Backup != nil && res.RequeueAfter == 0 {
		res.RequeueAfter = common.BackupStatusInterval
	}
	return res, err
}

// reconcileChildren renders the host pod and applies its ConfigMap, Service,
// StatefulSet and NetworkPolicy. It returns the live StatefulSet.
func (r *Reconciler) reconcileChildren(ctx context.Context, s *store) (*appsv1.StatefulSet, error) {
	h := render.DataHost{Kind: r.Kind, Namespace: s.obj.GetNamespace(), Name: s.obj.GetName()}
	if err := s.host(ctx, r.Client, r.Refs.Live, &h); err != nil {
		return nil, err
	}
	if err := common.CheckBackup(ctx, r.Refs.Meta, h.Namespace, "spec", s.backup); err != nil {
		return nil, err
	}
	w, out, hash, err := r.render(ctx, s, h)
	if err != nil {
		return nil, err
	}
	log.FromContext(ctx).V(1).Info("rendered the host", "kind", r.Kind, "version", out.Version, "migrations", len(h.Migrations), "worker", w.Name)
	set := specs.BuildDataStoreChildren(s.obj, h, w, s.storage, s.backup, out, hash, r.Options)
	return common.ApplyShardSet(ctx, r.Client, r.Events, s.obj, specs.DataStoreSelector(r.Kind, h.Name), set, r.Options.NetworkPolicies)
}

// render renders the host pod: the store's own Worker, or a Queue's consumer Worker
// (with everything it binds) whose queue() handler the queue calls in-process.
func (r *Reconciler) render(ctx context.Context, s *store, h render.DataHost) (*fleetv1alpha1.Worker, *render.Output, string, error) {
	if s.consumer == "" {
		w := render.DataHostWorker(h)
		out, hash, err := common.RenderDataHost(ctx, r.Options, h, nil)
		return w, out, hash, err
	}
	w, err := common.WorkerRef(ctx, r.Client, r.Refs.Live, h.Namespace, s.consumer)
	if err != nil {
		return nil, nil, "", err
	}
	out, hash, err := common.RenderWorker(ctx, r.Client, r.Refs, r.Options, w, nil, nil, func(in *render.Input) { in.DataHost = &h })
	return w, out, hash, err
}

// computeStatus is the one place the status is computed: Degraded/lastFailure from the
// host pod, Ready when it is ready and runs the current revision.
func computeStatus(gen int64, before fleetv1alpha1.DataStoreStatus, sts *appsv1.StatefulSet, pods []corev1.Pod, err error) fleetv1alpha1.DataStoreStatus {
	st := *before.DeepCopy()
	if common.SetPassConditions(&st.Conditions, &st.LastFailure, gen, pods, nil, err) {
		return st
	}
	st.ObservedGeneration = gen
	st.ReadyShards = sts.Status.ReadyReplicas
	c := common.Conditions{List: &st.Conditions, Generation: gen}
	current := sts.Status.ObservedGeneration >= sts.Generation &&
		(sts.Status.UpdateRevision == "" || sts.Status.CurrentRevision == sts.Status.UpdateRevision) &&
		sts.Status.UpdatedReplicas == 1
	switch {
	case current && st.ReadyShards == 1:
		c.SetReady(metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled, "the host pod is ready",
			metav1.ConditionFalse, fleetv1alpha1.ReasonRolloutComplete, "rollout complete")
	case !current:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonRollingOut,
			"rolling out the current version; calls are refused until the host pod is ready",
			metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "rolling out the current version")
	default:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonPodsUnavailable,
			fmt.Sprintf("the host pod is not ready (%d of 1); calls are refused until it is", st.ReadyShards),
			metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "waiting for the host pod to become ready")
	}
	return st
}

// SetupWithManager registers the reconciler of r.Kind and its watches: owned children,
// the host pod (for Degraded) and, for D1, the migrations ConfigMap (its metadata,
// through r.Refs).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.backoff = common.NewBackoff()
	s := r.newStore()
	b := ctrl.NewControllerManagedBy(mgr).
		For(s.obj).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// Its status changes with every pod's readiness, which the pod watch covers.
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(common.PodOwner(specs.DataStoreOwnerLabel(r.Kind), podcontract.ComponentDataStore)))
	switch r.Kind {
	case render.DataD1:
		b = b.WatchesRawSource(r.Refs.Watch("ConfigMap", common.Referencing[fleetv1alpha1.D1DatabaseList](r.Client, common.IndexD1MigrationsConfigMap)))
	case render.DataQueue:
		// The host runs the consumer's code: re-render on what that rendering reads,
		// and on the Queues named as dead letter queues (their consumer).
		b = common.WatchWorkerReaders[fleetv1alpha1.QueueList](b, r.Client, r.Refs).
			Watches(&fleetv1alpha1.Queue{}, handler.EnqueueRequestsFromMapFunc(common.Referencing[fleetv1alpha1.QueueList](r.Client, common.IndexQueueDeadLetter)))
	}
	return b.Named(string(r.Kind)).
		WithOptions(controller.Options{MaxConcurrentReconciles: common.MaxConcurrentReconciles}).
		Complete(r)
}
