// Package workflow reconciles a Workflow into its engine: a StatefulSet of one pod, a
// headless Service on the engine API and the pod's ConfigMap.
package workflow

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// StatsInterval is how often a ready Workflow's instance counts are refreshed from its
// engine (status.instances).
const StatsInterval = 15 * time.Second

// Reconciler reconciles a Workflow into its engine: a StatefulSet of one pod
// (workerd running the Worker's code with the workflow runner, the sidecar holding the
// instance store on the pod's PVC), a headless Service on the engine API and the pod's
// ConfigMap. Worker pods reach the engine through their workflow bindings.
type Reconciler struct {
	client.Client
	Options specs.Options
	Events  common.Events
	// Refs reads the ConfigMaps and Secrets the operator does not label.
	Refs *common.References
	// APIReader reads uncached the claims, volumes and Nodes of a pod that cannot be
	// scheduled (common.MoveStrandedVolumes): no informer on every Node and volume.
	APIReader client.Reader
	// HTTP reads the engine's instance counts (GET /workflows/{name}/stats on the
	// engine pod's sidecar). Default: a client with a 3 s timeout.
	HTTP    *http.Client
	backoff *common.Backoff
}

// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workflows,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workflows/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workflows/finalizers,verbs=update

// Reconcile fetches the Workflow, renders its engine pod from the Worker, applies the
// children, reads the instance counts and writes the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wf := &fleetv1alpha1.Workflow{}
	if err := r.Get(ctx, req.NamespacedName, wf); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wf.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	sts, err := r.reconcileChildren(ctx, wf)
	pods, perr := common.ListPods(ctx, r.Client, wf.Namespace, specs.WorkflowSelector(wf.Name))
	if err == nil {
		err = perr
	}
	bk := specs.WorkflowBackup(wf)
	if err := r.Events.MoveStrandedVolumes(ctx, r.Client, r.APIReader, wf, common.BackupHolds(bk.Backup, wf.Status.Backup, bk.Path), pods); err != nil {
		log.FromContext(ctx).Error(err, "move the volume of a pod pinned to a lost or drained node")
	}
	counts := r.instanceCounts(ctx, wf, pods)
	st := computeStatus(wf, sts, pods, counts, err)
	st.Backup = r.Events.Backup(ctx, r.Client, r.Options, wf, bk.Backup, bk.Path, wf.Status.Backup, sts, pods)
	r.Events.Transitions(ctx, wf, wf.Status.Conditions, st.Conditions)
	if err := common.WriteStatus(ctx, r.Client, wf, &wf.Status, st); err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.backoff.Result(ctx, req.NamespacedName, err)
	if err == nil && meta.IsStatusConditionTrue(st.Conditions, fleetv1alpha1.ConditionReady) {
		res.RequeueAfter = StatsInterval
	}
	return res, err
}

// reconcileChildren renders the engine pod from the Worker (with every sibling it
// binds), applies the ConfigMap, the Service and the StatefulSet, and prunes older
// ConfigMaps. It returns the live StatefulSet.
func (r *Reconciler) reconcileChildren(ctx context.Context, wf *fleetv1alpha1.Workflow) (*appsv1.StatefulSet, error) {
	set, err := r.build(ctx, wf)
	if err != nil {
		return nil, err
	}
	return common.ApplyShardSet(ctx, r.Client, r.Events, wf, specs.WorkflowSelector(wf.Name), set, r.Options.NetworkPolicies)
}

// build checks the engine spec, reads the Worker and everything it references, and
// builds the engine's children.
func (r *Reconciler) build(ctx context.Context, wf *fleetv1alpha1.Workflow) (specs.ShardSet, error) {
	if e := wf.Spec.Engine; e != nil && e.Shards != nil && *e.Shards != 1 {
		return specs.ShardSet{}, common.Blocked(fleetv1alpha1.ReasonInvalidSpec,
			fmt.Sprintf("spec.engine.shards: %d is not supported yet: one engine shard per Workflow (docs/workflows.md)", *e.Shards))
	}
	w, err := common.WorkerRef(ctx, r.Client, r.Refs.Live, wf.Namespace, wf.Spec.WorkerRef.Name)
	if err != nil {
		return specs.ShardSet{}, err
	}
	if err := common.CheckBackup(ctx, r.Refs.Meta, wf.Namespace, "spec.engine", specs.WorkflowBackup(wf)); err != nil {
		return specs.ShardSet{}, err
	}
	out, inputsHash, err := common.RenderWorker(ctx, r.Client, r.Refs, r.Options, w, nil,
		[]render.WorkflowHost{{Name: wf.Name, ClassName: wf.Spec.ClassName}})
	if err != nil {
		return specs.ShardSet{}, err
	}
	engine, err := specs.EngineConfig(wf)
	if err != nil {
		return specs.ShardSet{}, common.Blocked(fleetv1alpha1.ReasonInvalidSpec, err.Error())
	}
	return specs.BuildWorkflowChildren(wf, w, out, engine, inputsHash, r.Options)
}

// instanceCounts asks a ready engine pod's sidecar for the instance counts; nil when no
// pod is ready or the engine does not answer (the status keeps the last counts: they
// are informational, never a reason to fail the pass).
func (r *Reconciler) instanceCounts(ctx context.Context, wf *fleetv1alpha1.Workflow, pods []corev1.Pod) *fleetv1alpha1.WorkflowInstanceCounts {
	for _, p := range common.ReadyPods(pods) {
		ec, err := r.engineClient(ctx, wf.Namespace, p.Status.PodIP)
		if err != nil {
			log.FromContext(ctx).V(1).Info("workflow engine stats unavailable", "pod", p.Name, "error", err.Error())
			return nil
		}
		stats, err := ec.Stats(ctx, wf.Name)
		if err != nil {
			log.FromContext(ctx).V(1).Info("workflow engine stats unavailable", "pod", p.Name, "error", err.Error())
			return nil
		}
		c := stats.Counts
		return &fleetv1alpha1.WorkflowInstanceCounts{
			Queued: int64(c[api.StatusQueued]), Running: int64(c[api.StatusRunning]), Paused: int64(c[api.StatusPaused]),
			Waiting: int64(c[api.StatusWaiting]), WaitingForPause: int64(c[api.StatusWaitingForPause]),
			Complete: int64(c[api.StatusComplete]), Errored: int64(c[api.StatusErrored]), Terminated: int64(c[api.StatusTerminated]),
		}
	}
	return nil
}

// engineClient is a client of the engine API of the pod at ip: mutual TLS with the
// manager's certificate (Options.Issuer), or plain HTTP on r.HTTP in tests without one.
func (r *Reconciler) engineClient(ctx context.Context, ns, ip string) (*api.Client, error) {
	if r.Options.Issuer != nil {
		hc, err := r.Options.Issuer.HTTPClient(ctx, ns, 3*time.Second)
		if err != nil {
			return nil, err
		}
		return api.NewClient(api.PodTLSURL(ip), hc), nil
	}
	hc := r.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 3 * time.Second}
	}
	return api.NewClient(api.PodURL(ip), hc), nil
}

// computeStatus is the one place the status is computed: Degraded from the
// engine pod (failure.ClassifyPods), readyShards from the StatefulSet, instance counts
// when the engine answered, Ready when the engine pod is ready and runs the current
// revision.
func computeStatus(wf *fleetv1alpha1.Workflow, sts *appsv1.StatefulSet, pods []corev1.Pod, counts *fleetv1alpha1.WorkflowInstanceCounts, err error) fleetv1alpha1.WorkflowStatus {
	st := *wf.Status.DeepCopy()
	gen := wf.Generation
	var lastFailure *fleetv1alpha1.FailureStatus // Workflow status has no lastFailure; Degraded carries it
	if common.SetPassConditions(&st.Conditions, &lastFailure, gen, pods, nil, err) {
		return st
	}
	st.ObservedGeneration = gen
	st.ReadyShards = sts.Status.ReadyReplicas
	if counts != nil {
		st.Instances = *counts
	}
	const desired = 1
	c := common.Conditions{List: &st.Conditions, Generation: gen}
	current := sts.Status.ObservedGeneration >= sts.Generation &&
		(sts.Status.UpdateRevision == "" || sts.Status.CurrentRevision == sts.Status.UpdateRevision) &&
		sts.Status.UpdatedReplicas == desired
	switch {
	case current && st.ReadyShards == desired:
		c.SetReady(metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled, "the engine is ready",
			metav1.ConditionFalse, fleetv1alpha1.ReasonRolloutComplete, "rollout complete")
	case !current:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonRollingOut,
			"rolling out the current version of the engine; instance calls are refused until it is ready",
			metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "rolling out the current version")
	default:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonPodsUnavailable,
			"the engine pod is not ready; instance calls are refused until it is",
			metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "waiting for the engine pod to become ready")
	}
	return st
}

// SetupWithManager registers the reconciler and its watches: owned children, the
// engine pod (for Degraded), and everything the engine's rendering reads: the Worker
// named by spec.workerRef and every object that Worker references, siblings included
// (common.WatchWorkerReaders).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.backoff = common.NewBackoff()
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.Workflow{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// Its status changes with every pod's readiness, which the pod watch covers.
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(common.PodOwner(podcontract.LabelWorkflow, podcontract.ComponentWorkflowEngine)))
	return common.WatchWorkerReaders[fleetv1alpha1.WorkflowList](b, r.Client, r.Refs).
		Named("workflow").
		WithOptions(controller.Options{MaxConcurrentReconciles: common.MaxConcurrentReconciles}).
		Complete(r)
}
