package controller

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// indexWorkflowWorkerRef indexes Workflows by spec.workerRef.name.
const indexWorkflowWorkerRef = ".spec.workerRef.name"

// StatsInterval is how often a ready Workflow's instance counts are refreshed from its
// engine (status.instances).
const StatsInterval = 15 * time.Second

// WorkflowReconciler reconciles a Workflow into its engine: a StatefulSet of one pod
// (workerd running the Worker's code with the workflow runner, the sidecar holding the
// instance store on the pod's PVC), a headless Service on the engine API and the pod's
// ConfigMap. Worker pods reach the engine through their workflow bindings.
type WorkflowReconciler struct {
	client.Client
	Scheme  *runtime.Scheme
	Options Options
	// HTTP reads the engine's instance counts (GET /workflows/{name}/stats on the
	// engine pod's sidecar). Default: a client with a 3 s timeout.
	HTTP *http.Client
}

// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workflows,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workflows/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workflows/finalizers,verbs=update

// Reconcile fetches the Workflow, renders its engine pod from the Worker, applies the
// children, reads the instance counts and writes the status once.
func (r *WorkflowReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wf := &fleetv1alpha1.Workflow{}
	if err := r.Get(ctx, req.NamespacedName, wf); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wf.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	sts, err := r.reconcileChildren(ctx, wf)
	pods, perr := r.listPods(ctx, wf)
	if err == nil {
		err = perr
	}
	counts := r.instanceCounts(ctx, wf, pods)
	st := computeWorkflowStatus(wf, sts, pods, counts, err)
	if serr := r.writeStatus(ctx, wf, st); serr != nil {
		return ctrl.Result{}, serr
	}
	res, err := passResult(ctx, err)
	if err == nil && metaIsTrue(st.Conditions, fleetv1alpha1.ConditionReady) {
		res.RequeueAfter = StatsInterval
	}
	return res, err
}

func (r *WorkflowReconciler) reconcileChildren(ctx context.Context, wf *fleetv1alpha1.Workflow) (*appsv1.StatefulSet, error) {
	if e := wf.Spec.Engine; e != nil && e.Shards != nil && *e.Shards != 1 {
		return nil, &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec,
			message: fmt.Sprintf("spec.engine.shards: %d is not supported yet: one engine shard per Workflow (docs/workflows.md)", *e.Shards)}
	}
	w, err := workerRef(ctx, r.Client, wf.Namespace, wf.Spec.WorkerRef.Name)
	if err != nil {
		return nil, err
	}
	out, inputsHash, err := renderWorker(ctx, r.Client, r.Options, w, nil,
		[]render.WorkflowHost{{Name: wf.Name, ClassName: wf.Spec.ClassName}})
	if err != nil {
		return nil, err
	}
	engine, err := EngineConfig(wf)
	if err != nil {
		return nil, &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: err.Error()}
	}
	children, err := BuildWorkflowChildren(wf, w, out, engine, inputsHash, r.Options)
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{children.ConfigMap, children.Service, children.StatefulSet} {
		if err := applyObject(ctx, r.Client, obj); err != nil {
			return nil, fmt.Errorf("apply %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	if err := deleteOwnedConfigMaps(ctx, r.Client, wf, client.MatchingLabels(workflowSelector(wf)), map[string]bool{children.ConfigMap.Name: true}); err != nil {
		return nil, err
	}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(children.StatefulSet), sts); err != nil {
		return nil, err
	}
	return sts, nil
}

func (r *WorkflowReconciler) listPods(ctx context.Context, wf *fleetv1alpha1.Workflow) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(wf.Namespace), client.MatchingLabels(workflowSelector(wf))); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// instanceCounts asks a ready engine pod's sidecar for the instance counts; nil when no
// pod is ready or the engine does not answer (the status keeps the last counts: they
// are informational, never a reason to fail the pass).
func (r *WorkflowReconciler) instanceCounts(ctx context.Context, wf *fleetv1alpha1.Workflow, pods []corev1.Pod) *fleetv1alpha1.WorkflowInstanceCounts {
	for _, p := range pods {
		if p.Status.PodIP == "" || !podReady(&p) {
			continue
		}
		hc := r.HTTP
		if hc == nil {
			hc = &http.Client{Timeout: 3 * time.Second}
		}
		stats, err := api.NewClient(api.PodURL(p.Status.PodIP), hc).Stats(ctx, wf.Name)
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

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *WorkflowReconciler) writeStatus(ctx context.Context, wf *fleetv1alpha1.Workflow, st fleetv1alpha1.WorkflowStatus) error {
	if reflect.DeepEqual(wf.Status, st) {
		return nil
	}
	wf.Status = st
	return r.Status().Update(ctx, wf)
}

// computeWorkflowStatus is the one place the status is computed: Degraded from the
// engine pod (failure.ClassifyPods), readyShards from the StatefulSet, instance counts
// when the engine answered, Ready when the engine pod is ready and runs the current
// revision.
func computeWorkflowStatus(wf *fleetv1alpha1.Workflow, sts *appsv1.StatefulSet, pods []corev1.Pod, counts *fleetv1alpha1.WorkflowInstanceCounts, err error) fleetv1alpha1.WorkflowStatus {
	st := *wf.Status.DeepCopy()
	gen := wf.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	var lastFailure *fleetv1alpha1.FailureStatus // Workflow status has no lastFailure; Degraded carries it
	if setPassConditions(&st.Conditions, &lastFailure, gen, pods, err) {
		return st
	}
	st.ObservedGeneration = gen
	st.ReadyShards = sts.Status.ReadyReplicas
	if counts != nil {
		st.Instances = *counts
	}
	const desired = 1
	current := sts.Status.ObservedGeneration >= sts.Generation &&
		(sts.Status.UpdateRevision == "" || sts.Status.CurrentRevision == sts.Status.UpdateRevision) &&
		sts.Status.UpdatedReplicas == desired
	switch {
	case current && st.ReadyShards == desired:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled, "the engine is ready")
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, fleetv1alpha1.ReasonRolloutComplete, "rollout complete")
	case !current:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonRollingOut,
			"rolling out the current version of the engine; instance calls are refused until it is ready")
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "rolling out the current version")
	default:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonPodsUnavailable,
			"the engine pod is not ready; instance calls are refused until it is")
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "waiting for the engine pod to become ready")
	}
	return st
}

// resolveWorkflows gives the engine address of every Workflow w binds. A missing
// Workflow is an *errBlocked naming the binding.
func resolveWorkflows(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, opts Options) (map[string]render.WorkflowTarget, error) {
	out := map[string]render.WorkflowTarget{}
	for i, b := range w.Spec.Bindings {
		kind, name := b.Reference()
		if kind != fleetv1alpha1.ReferenceWorkflow {
			continue
		}
		wf := &fleetv1alpha1.Workflow{}
		err := c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, wf)
		if apierrors.IsNotFound(err) {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonReferenceNotFound,
				message: fmt.Sprintf("spec.bindings[%d] (%s): Workflow %q not found in namespace %q", i, b.Name, name, w.Namespace)}
		}
		if err != nil {
			return nil, err
		}
		out[wf.Name] = render.WorkflowTargetFor(w.Namespace, wf.Name, render.Options{ClusterDomain: opts.ClusterDomain})
	}
	return out, nil
}

// SetupWithManager registers the reconciler, its index and its watches: owned
// children, the Worker named by spec.workerRef and the engine pod (for Degraded).
func (r *WorkflowReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &fleetv1alpha1.Workflow{}, indexWorkflowWorkerRef, func(o client.Object) []string {
		return []string{o.(*fleetv1alpha1.Workflow).Spec.WorkerRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.Workflow{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleetv1alpha1.Worker{}, handler.EnqueueRequestsFromMapFunc(referencing[fleetv1alpha1.WorkflowList](r.Client, indexWorkflowWorkerRef)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podOwner(podcontract.LabelWorkflow, podcontract.ComponentWorkflowEngine))).
		Named("workflow").
		Complete(r)
}
