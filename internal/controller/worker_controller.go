package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Field indexes on Workers, used to map a changed Secret, ConfigMap or Worker to the
// Workers that reference it.
const (
	indexWorkerSecrets     = ".spec.bindings.secretKeyRef.name"
	indexWorkerConfigMap   = ".spec.source.configMap.name"
	indexWorkerServiceRef  = ".spec.bindings.service.name"
	indexWorkerDONSRef     = ".spec.bindings.durableObjectNamespace.name"
	indexWorkerWorkflowRef = ".spec.bindings.workflow.name"
)

// WorkerReconciler reconciles a Worker into a ConfigMap, a Deployment and a Service.
type WorkerReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	Options  Options
}

// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workers/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// workerInputs is what a Worker's rendering depends on besides its own spec.
type workerInputs struct {
	configMap *corev1.ConfigMap
	services  map[string]render.ServiceTarget
	hash      string
}

// errBlocked is a missing input: the Worker cannot be rendered until it appears.
// The watches on Secrets, ConfigMaps and Workers requeue it then.
type errBlocked struct{ reason, message string }

func (e *errBlocked) Error() string { return e.message }

// Reconcile fetches the Worker, resolves its inputs, renders, applies the children and
// writes the status once.
func (r *WorkerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &fleetv1alpha1.Worker{}
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !w.DeletionTimestamp.IsZero() {
		// Children carry owner references: the garbage collector removes them.
		return ctrl.Result{}, nil
	}

	dep, version, err := r.reconcileChildren(ctx, w)
	pods, perr := r.listPods(ctx, w)
	if err == nil {
		err = perr
	}
	st := computeWorkerStatus(w, dep, pods, version, r.Options, err)
	if serr := r.writeStatus(ctx, w, st); serr != nil {
		return ctrl.Result{}, serr
	}
	return passResult(ctx, err)
}

// reconcileChildren renders the Worker and applies its ConfigMap, Deployment and
// Service. It returns the live Deployment and the rendered version.
func (r *WorkerReconciler) reconcileChildren(ctx context.Context, w *fleetv1alpha1.Worker) (*appsv1.Deployment, string, error) {
	out, inputsHash, err := renderWorker(ctx, r.Client, r.Options, w, nil, nil)
	if err != nil {
		return nil, "", err
	}
	children := BuildWorkerChildren(w, out, inputsHash, r.Options)
	for _, obj := range []client.Object{children.ConfigMap, children.Service, children.RPCService, children.Deployment} {
		if err := r.apply(ctx, obj); err != nil {
			return nil, out.Version, fmt.Errorf("apply %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	if err := r.pruneConfigMaps(ctx, w, children.ConfigMap.Name); err != nil {
		return nil, out.Version, err
	}
	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(children.Deployment), dep); err != nil {
		return nil, out.Version, err
	}
	return dep, out.Version, nil
}

// renderWorker renders the pods of Worker w after reading everything it references:
// its inputs (resolveInputs), the DurableObjectNamespaces and Workflows it binds. host,
// when set, is the DurableObjectNamespace whose shards are rendered; wfHosts are the
// Workflows whose engine runs in the pods. It returns the output and the inputs hash.
// A missing reference or a spec the renderer refuses is an *errBlocked.
func renderWorker(ctx context.Context, c client.Client, opts Options, w *fleetv1alpha1.Worker, host *fleetv1alpha1.DurableObjectNamespace, wfHosts []render.WorkflowHost) (*render.Output, string, error) {
	in, err := (&WorkerReconciler{Client: c, Options: opts}).resolveInputs(ctx, w)
	if err != nil {
		return nil, "", err
	}
	dos, err := resolveDurableObjects(ctx, c, w, host, opts)
	if err != nil {
		return nil, "", err
	}
	wfs, err := resolveWorkflows(ctx, c, w, opts)
	if err != nil {
		return nil, "", err
	}
	rin := render.Input{
		Worker: w, ConfigMap: in.configMap, Services: in.services,
		Options:        render.Options{ClusterDomain: opts.ClusterDomain},
		DurableObjects: dos, Workflows: wfs, WorkflowHosts: wfHosts,
	}
	if host != nil {
		rin.Host = host.Name
	}
	out, err := render.Render(rin)
	if err != nil {
		return nil, "", &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: err.Error()}
	}
	return out, in.hash, nil
}

// workerRef reads the Worker named by an object's spec.workerRef; a missing one is an
// *errBlocked (ReferenceNotFound).
func workerRef(ctx context.Context, c client.Client, namespace, name string) (*fleetv1alpha1.Worker, error) {
	w := &fleetv1alpha1.Worker{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, w)
	if apierrors.IsNotFound(err) {
		return nil, &errBlocked{reason: fleetv1alpha1.ReasonReferenceNotFound,
			message: fmt.Sprintf("spec.workerRef: Worker %q not found in namespace %q", name, namespace)}
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// resolveInputs reads what the Worker references. Secrets are read as metadata only:
// the operator never holds secret values; their resourceVersions feed the inputs hash.
func (r *WorkerReconciler) resolveInputs(ctx context.Context, w *fleetv1alpha1.Worker) (*workerInputs, error) {
	in := &workerInputs{services: map[string]render.ServiceTarget{}}
	var versions []string
	if src := w.Spec.Source.ConfigMap; src != nil {
		cm := &corev1.ConfigMap{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: src.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &errBlocked{reason: fleetv1alpha1.ReasonConfigMapNotFound,
					message: fmt.Sprintf("spec.source.configMap: ConfigMap %q not found in namespace %q", src.Name, w.Namespace)}
			}
			return nil, err
		}
		in.configMap = cm
		versions = append(versions, "configmap/"+cm.Name+"@"+cm.ResourceVersion)
	}
	// Secrets and other Workers are resolved here; DurableObjectNamespaces and Workflows
	// by resolveDurableObjects and resolveWorkflows.
	for i, b := range w.Spec.Bindings {
		kind, name := b.Reference()
		switch kind {
		case fleetv1alpha1.ReferenceSecret:
			meta := &metav1.PartialObjectMetadata{}
			meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
			err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, meta)
			if apierrors.IsNotFound(err) {
				if b.Optional() {
					continue
				}
				return nil, &errBlocked{reason: fleetv1alpha1.ReasonSecretNotFound,
					message: fmt.Sprintf("spec.bindings[%d] (%s): Secret %q not found in namespace %q", i, b.Name, name, w.Namespace)}
			}
			if err != nil {
				return nil, err
			}
			versions = append(versions, "secret/"+meta.Name+"@"+meta.ResourceVersion)
		case fleetv1alpha1.ReferenceWorker:
			target := &fleetv1alpha1.Worker{}
			err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, target)
			if apierrors.IsNotFound(err) {
				return nil, &errBlocked{reason: fleetv1alpha1.ReasonReferenceNotFound,
					message: fmt.Sprintf("spec.bindings[%d] (%s): Worker %q not found in namespace %q", i, b.Name, name, w.Namespace)}
			}
			if err != nil {
				return nil, err
			}
			in.services[target.Name] = render.ServiceTarget{Address: render.RPCAddress(target, render.Options{ClusterDomain: r.Options.ClusterDomain})}
		}
	}
	sort.Strings(versions)
	h := sha256.New()
	for _, v := range versions {
		fmt.Fprintln(h, v)
	}
	in.hash = hex.EncodeToString(h.Sum(nil))[:16]
	return in, nil
}

// apply server-side applies a typed object with the operator's single field owner.
func (r *WorkerReconciler) apply(ctx context.Context, obj client.Object) error {
	return applyObject(ctx, r.Client, obj)
}

func applyObject(ctx context.Context, c client.Client, obj client.Object) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: raw}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(podcontract.FieldOwner), client.ForceOwnership)
}

// pruneConfigMaps deletes config versions no ReplicaSet of the Worker still runs.
func (r *WorkerReconciler) pruneConfigMaps(ctx context.Context, w *fleetv1alpha1.Worker, current string) error {
	sel := client.MatchingLabels(selectorLabels(podcontract.ComponentWorker, podcontract.LabelWorker, w.Name))
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
	return deleteOwnedConfigMaps(ctx, r.Client, w, sel, inUse)
}

// deleteOwnedConfigMaps deletes the ConfigMaps matching sel that owner controls and
// keep does not name (config versions no pod runs any more). It reads metadata only.
func deleteOwnedConfigMaps(ctx context.Context, c client.Client, owner metav1.Object, sel client.MatchingLabels, keep map[string]bool) error {
	cms := &metav1.PartialObjectMetadataList{}
	cms.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, cms, client.InNamespace(owner.GetNamespace()), sel); err != nil {
		return err
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		if keep[cm.Name] || !metav1.IsControlledBy(cm, owner) {
			continue
		}
		if err := c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

func (r *WorkerReconciler) listPods(ctx context.Context, w *fleetv1alpha1.Worker) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := r.List(ctx, pods, client.InNamespace(w.Namespace), client.MatchingLabels(selectorLabels(podcontract.ComponentWorker, podcontract.LabelWorker, w.Name)))
	return pods.Items, err
}

// writeStatus writes the computed status with one update of the status subresource,
// and records an Event when Degraded turns on.
func (r *WorkerReconciler) writeStatus(ctx context.Context, w *fleetv1alpha1.Worker, st fleetv1alpha1.WorkerStatus) error {
	before := w.DeepCopy()
	wasDegraded := metaIsTrue(before.Status.Conditions, fleetv1alpha1.ConditionDegraded)
	w.Status = st
	if r.Recorder != nil && !wasDegraded && metaIsTrue(st.Conditions, fleetv1alpha1.ConditionDegraded) && st.LastFailure != nil {
		cond := meta.FindStatusCondition(st.Conditions, fleetv1alpha1.ConditionDegraded)
		r.Recorder.Eventf(w, nil, corev1.EventTypeWarning, cond.Reason, "Degraded", "%s", cond.Message)
	}
	if equalStatus(before.Status, w.Status) {
		return nil
	}
	return r.Status().Update(ctx, w)
}

// SetupWithManager registers the reconciler, its indexes and its watches.
func (r *WorkerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	// One index per kind of object a binding references: the Workers to requeue when
	// that object changes.
	for _, ix := range []struct{ name, kind string }{
		{indexWorkerSecrets, fleetv1alpha1.ReferenceSecret},
		{indexWorkerServiceRef, fleetv1alpha1.ReferenceWorker},
		{indexWorkerDONSRef, fleetv1alpha1.ReferenceDurableObjectNamespace},
		{indexWorkerWorkflowRef, fleetv1alpha1.ReferenceWorkflow},
	} {
		if err := idx.IndexField(ctx, &fleetv1alpha1.Worker{}, ix.name, func(o client.Object) []string {
			return o.(*fleetv1alpha1.Worker).ReferencedNames(ix.kind)
		}); err != nil {
			return err
		}
	}
	if err := idx.IndexField(ctx, &fleetv1alpha1.Worker{}, indexWorkerConfigMap, func(o client.Object) []string {
		if cm := o.(*fleetv1alpha1.Worker).Spec.Source.ConfigMap; cm != nil {
			return []string{cm.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.Worker{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesMetadata(secretMeta, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(indexWorkerSecrets))).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(indexWorkerConfigMap))).
		Watches(&fleetv1alpha1.Worker{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(indexWorkerServiceRef)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podOwner(podcontract.LabelWorker, podcontract.ComponentWorker))).
		Watches(&fleetv1alpha1.DurableObjectNamespace{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(indexWorkerDONSRef))).
		Watches(&fleetv1alpha1.Workflow{}, handler.EnqueueRequestsFromMapFunc(r.workersReferencing(indexWorkerWorkflowRef))).
		Named("worker").
		// Reconciles are I/O-bound (a few API calls each): several at once.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

func (r *WorkerReconciler) workersReferencing(index string) handler.MapFunc {
	return referencing[fleetv1alpha1.WorkerList](r.Client, index)
}

// referencing maps an object to the objects of list type L in its namespace whose
// field index holds the object's name (e.g. the Workers binding a Workflow).
func referencing[L any, PL interface {
	*L
	client.ObjectList
}](c client.Reader, index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := PL(new(L))
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		_ = meta.EachListItem(list, func(obj runtime.Object) error {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj.(client.Object))})
			return nil
		})
		return reqs
	}
}

// podOwner maps a pod to its owner through the owner label of its component.
func podOwner(ownerLabel, component string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[podcontract.LabelComponent] != component || l[ownerLabel] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[ownerLabel]}}}
	}
}
