// Package worker reconciles a Worker into a ConfigMap of its rendered config, a
// Deployment, two Services (http, rpc) and its pods' NetworkPolicy.
package worker

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// Reconciler reconciles a Worker into a ConfigMap, a Deployment and Services.
type Reconciler struct {
	client.Client
	Options specs.Options
	Events  common.Events
	// Refs reads the ConfigMaps and Secrets the operator does not label.
	Refs *common.References
	// Logs holds the newest failure read from each Worker's workerd logs and wakes the
	// Worker when it finds a newer one; nil: the scan is off.
	Logs    *common.LogScanner
	backoff *common.Backoff
}

// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workers/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the Worker, renders it with everything it references, applies the
// children and writes the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &fleetv1alpha1.Worker{}
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		if apierrors.IsNotFound(err) {
			r.Logs.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !w.DeletionTimestamp.IsZero() {
		// Children carry owner references: the garbage collector removes them.
		return ctrl.Result{}, nil
	}
	dep, version, err := r.reconcileChildren(ctx, w)
	pods, perr := common.ListPods(ctx, r.Client, w.Namespace, specs.WorkerSelector(w.Name))
	if err == nil {
		err = perr
	}
	st := computeStatus(w, dep, pods, r.logged(w), version, r.Options, err)
	if err := r.writeStatus(ctx, w, st); err != nil {
		return ctrl.Result{}, err
	}
	return r.backoff.Result(ctx, req.NamespacedName, err)
}

// reconcileChildren renders the Worker and applies its NetworkPolicy (or deletes it
// when Options.NetworkPolicies is off), ConfigMap, Deployment and Services. It returns the live Deployment and the rendered version.
func (r *Reconciler) reconcileChildren(ctx context.Context, w *fleetv1alpha1.Worker) (*appsv1.Deployment, string, error) {
	out, inputsHash, err := common.RenderWorker(ctx, r.Client, r.Refs, r.Options, w, nil, nil)
	if err != nil {
		return nil, "", err
	}
	children := specs.BuildWorkerChildren(w, out, inputsHash, r.Options)
	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(children.Deployment), dep); client.IgnoreNotFound(err) != nil {
		return nil, out.Version, err
	}
	before := dep.Spec.Template.Annotations[podcontract.AnnotationVersion]
	if err := common.SyncNetworkPolicy(ctx, r.Client, w, children.NetworkPolicy, r.Options.NetworkPolicies); err != nil {
		return nil, out.Version, err
	}
	if err := common.ApplyAll(ctx, r.Client, children.ConfigMap, children.Service, children.RPCService, children.Deployment); err != nil {
		return nil, out.Version, err
	}
	r.Events.Applied(ctx, w, before, out.Version)
	log.FromContext(ctx).V(1).Info("applied the children", "version", out.Version, "deployment", children.Deployment.Name)
	if err := r.pruneConfigMaps(ctx, w, children.ConfigMap.Name); err != nil {
		return nil, out.Version, err
	}
	dep, err = common.Live(ctx, r.Client, children.Deployment, dep)
	return dep, out.Version, err
}

// pruneConfigMaps deletes config versions no ReplicaSet of the Worker still runs.
func (r *Reconciler) pruneConfigMaps(ctx context.Context, w *fleetv1alpha1.Worker, current string) error {
	sel := client.MatchingLabels(specs.WorkerSelector(w.Name))
	rsList := &appsv1.ReplicaSetList{}
	if err := r.List(ctx, rsList, client.InNamespace(w.Namespace), sel); err != nil {
		return err
	}
	inUse := map[string]bool{current: true}
	for _, rs := range rsList.Items {
		if rs.Status.Replicas == 0 && (rs.Spec.Replicas == nil || *rs.Spec.Replicas == 0) {
			continue
		}
		for _, v := range rs.Spec.Template.Spec.Volumes {
			if v.Name == "config" && v.ConfigMap != nil {
				inUse[v.ConfigMap.Name] = true
			}
		}
	}
	if len(inUse) > 1 {
		log.FromContext(ctx).V(1).Info("config versions still in use", "configMaps", len(inUse))
	}
	return common.DeleteOwnedConfigMaps(ctx, r.Client, w, sel, inUse)
}

// logged is the newest failure read from w's pods' logs; nil when none, or when it is
// older than w (it was a former Worker's of the same name).
func (r *Reconciler) logged(w *fleetv1alpha1.Worker) *failure.Failure {
	f := r.Logs.Newest(client.ObjectKeyFromObject(w))
	if f == nil || f.Time.Before(&w.CreationTimestamp) {
		return nil
	}
	return f
}

// writeStatus records the pass's transitions as Events and writes the status.
func (r *Reconciler) writeStatus(ctx context.Context, w *fleetv1alpha1.Worker, st fleetv1alpha1.WorkerStatus) error {
	r.Events.Transitions(ctx, w, w.Status.Conditions, st.Conditions)
	return common.WriteStatus(ctx, r.Client, w, &w.Status, st)
}

// SetupWithManager registers the reconciler and its watches (the indexes are
// common.SetupIndexes'): its children, its pods (for Degraded), the log scanner (a
// newer failure in a pod's log), and everything it
// reads: Secrets and its source ConfigMap (their metadata, through r.Refs), the
// Workers, DurableObjectNamespaces and Workflows it binds.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.backoff = common.NewBackoff()
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Logs != nil {
		b = b.WatchesRawSource(r.Logs.Source())
	}
	return b.
		For(&fleetv1alpha1.Worker{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(r.Refs.Watch("Secret", r.workersReferencing(common.IndexWorkerSecrets))).
		WatchesRawSource(r.Refs.Watch("ConfigMap", r.workersReferencing(common.IndexWorkerConfigMap))).
		Watches(&fleetv1alpha1.Worker{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(common.IndexWorkerServiceRef)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(common.PodOwner(podcontract.LabelWorker, podcontract.ComponentWorker))).
		Watches(&fleetv1alpha1.DurableObjectNamespace{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(common.IndexWorkerDONSRef))).
		Watches(&fleetv1alpha1.Workflow{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(common.IndexWorkerWorkflowRef))).
		Watches(&fleetv1alpha1.KVNamespace{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(common.IndexWorkerKVRef))).
		Watches(&fleetv1alpha1.D1Database{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(common.IndexWorkerD1Ref))).
		Watches(&fleetv1alpha1.Queue{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(common.IndexWorkerQueueRef))).
		Watches(&fleetv1alpha1.R2Bucket{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(common.IndexWorkerR2BucketRef)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("worker").
		WithOptions(controller.Options{MaxConcurrentReconciles: common.MaxConcurrentReconciles}).
		Complete(r)
}

func (r *Reconciler) workersReferencing(index string) handler.MapFunc {
	return common.Referencing[fleetv1alpha1.WorkerList](r.Client, index)
}
