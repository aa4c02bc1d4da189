// Package worker reconciles a Worker into a ConfigMap of its rendered config, a
// Deployment, two Services (http, rpc) and its pods' NetworkPolicy.
package worker

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
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
	if w.SharedUserWorker() {
		id, err := r.reconcileShared(ctx, w)
		if err := r.writeStatus(ctx, w, sharedStatus(w, id, err)); err != nil {
			return ctrl.Result{}, err
		}
		return r.backoff.Result(ctx, req.NamespacedName, err)
	}
	res, err := r.reconcileChildren(ctx, w)
	pods, perr := common.ListPods(ctx, r.Client, w.Namespace, specs.WorkerSelector(w.Name))
	if err == nil {
		err = perr
	}
	st := computeStatus(w, res, pods, r.logged(w), r.Options, err)
	if err := r.writeStatus(ctx, w, st); err != nil {
		return ctrl.Result{}, err
	}
	return r.backoff.Result(ctx, req.NamespacedName, err)
}

// passResult is what reconcileChildren found for the status.
type passResult struct {
	// dep is the Worker's own live Deployment; version its rendered version.
	dep     *appsv1.Deployment
	version string
	// deployed are spec.deployment's versions, ids resolved; versions those stored.
	deployed []fleetv1alpha1.DeploymentVersion
	versions []fleetv1alpha1.WorkerVersion
	// settled: no split Deployment is being started, rolled or retired.
	settled bool
}

// reconcileChildren stores the spec's version, then renders the deployed versions
// (planDeployment) and applies the NetworkPolicy (or deletes it when
// Options.NetworkPolicies is off), the ConfigMaps, Deployments and Services.
func (r *Reconciler) reconcileChildren(ctx context.Context, w *fleetv1alpha1.Worker) (passResult, error) {
	res := passResult{deployed: w.Spec.DeployedVersions()}
	if err := common.RecordVersion(ctx, r.Client, w); err != nil {
		// The Worker runs without it; only a later deployment naming it needs it.
		log.FromContext(ctx).Error(err, "could not store the spec's version", "version", w.Spec.VersionID())
	}
	primaryLive, secondaryLive, err := r.liveDeployments(ctx, w)
	if err != nil {
		return res, err
	}
	pods, err := common.ListPods(ctx, r.Client, w.Namespace, specs.WorkerSelector(w.Name))
	if err != nil {
		return res, err
	}
	secondary := readLive(secondaryLive, pods)
	p := planDeployment(res.deployed, readLive(primaryLive, pods), secondary)
	log.FromContext(ctx).V(1).Info("deployment plan", "primary", p.primary.version, "secondary", p.secondary.version,
		"split", p.primary.split != nil, "retireSecondary", p.retireSecondary)
	if len(res.deployed) == 2 {
		if err := r.prepareSplit(ctx, w); err != nil {
			return res, err
		}
	}
	if p.hopToken, err = hasToken(ctx, r.Client, w); err != nil {
		return res, err
	}
	cm, version, err := r.applyPrimary(ctx, w, p, primaryLive)
	res.version = version
	if err != nil {
		return res, err
	}
	secondaryCM, err := r.applySecondary(ctx, w, p, res.deployed, secondaryLive, secondary)
	if err != nil {
		return res, err
	}
	if err := r.pruneConfigMaps(ctx, w, cm, secondaryCM); err != nil {
		return res, err
	}
	if res.versions, err = r.keptVersions(ctx, w, res.deployed, p); err != nil {
		return res, err
	}
	res.settled = p.secondary.version == "" && !p.retireSecondary || len(res.deployed) == 2 && p.primary.split != nil && p.secondary.split != nil
	res.dep, err = common.Live(ctx, r.Client, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}}, primaryLive)
	return res, err
}

// applyPrimary renders p.primary's version into the Worker's own Deployment with its
// ConfigMap, Services and NetworkPolicy; it returns the ConfigMap's name and the
// rendered version.
func (r *Reconciler) applyPrimary(ctx context.Context, w *fleetv1alpha1.Worker, p plan, live *appsv1.Deployment) (string, string, error) {
	s := p.primary
	vw, err := r.versionWorker(ctx, w, s.version)
	if err != nil {
		return "", "", err
	}
	out, inputsHash, err := common.RenderWorker(ctx, r.Client, r.Refs, r.Options, vw, nil, nil, r.withSplit(w, s, p))
	if err != nil {
		return "", "", err
	}
	children := specs.BuildWorkerChildren(vw, out, inputsHash, r.Options)
	markSplit(&children.Deployment.Spec.Template, s)
	before := live.Spec.Template.Annotations[podcontract.AnnotationVersion]
	if err := common.SyncNetworkPolicy(ctx, r.Client, w, children.NetworkPolicy, r.Options.NetworkPolicies); err != nil {
		return "", out.Version, err
	}
	if err := common.ApplyAll(ctx, r.Client, children.ConfigMap, children.Service, children.RPCService, children.Deployment); err != nil {
		return "", out.Version, err
	}
	r.Events.Applied(ctx, w, before, out.Version)
	log.FromContext(ctx).V(1).Info("applied the children", "version", out.Version, "workerVersion", s.version, "deployment", children.Deployment.Name)
	return children.ConfigMap.Name, out.Version, nil
}

// applySecondary applies the split Deployment of p.secondary, or scales it to zero
// (live is the live one, empty when absent); it returns its ConfigMap's name ("" when
// none).
func (r *Reconciler) applySecondary(ctx context.Context, w *fleetv1alpha1.Worker, p plan, deployed []fleetv1alpha1.DeploymentVersion, live *appsv1.Deployment, ls liveSet) (string, error) {
	if p.retireSecondary {
		log.FromContext(ctx).Info("retiring the split Deployment: every pod runs the one deployed version", "deployment", live.Name)
		return "", retire(ctx, r.Client, live)
	}
	if p.secondary.version == "" {
		return "", nil
	}
	vw, err := r.versionWorker(ctx, w, p.secondary.version)
	if err != nil {
		return "", err
	}
	out, inputsHash, err := common.RenderWorker(ctx, r.Client, r.Refs, r.Options, vw, nil, nil, r.withSplit(w, p.secondary, p))
	if err != nil {
		return "", err
	}
	cm, sd := specs.BuildSplitDeployment(vw, out, inputsHash, r.Options, secondaryReplicas(w, deployed, p.secondary.version, ls))
	markSplit(&sd.Spec.Template, p.secondary)
	if err := common.ApplyAll(ctx, r.Client, cm, sd); err != nil {
		return "", err
	}
	log.FromContext(ctx).V(1).Info("applied the split Deployment", "workerVersion", p.secondary.version, "split", p.secondary.split != nil)
	return cm.Name, nil
}

// prepareSplit makes what a split needs besides the Deployments: the hop token's
// Secret and the two role Services (kept afterwards: the manager deletes neither).
func (r *Reconciler) prepareSplit(ctx context.Context, w *fleetv1alpha1.Worker) error {
	if err := ensureSecret(ctx, r.Client, w, specs.BuildSplitTokenSecret(w)); err != nil {
		return err
	}
	return common.ApplyAll(ctx, r.Client, specs.BuildRoleService(w, false), specs.BuildRoleService(w, true))
}

// liveDeployments are the Worker's own Deployment and its split one (empty when absent).
func (r *Reconciler) liveDeployments(ctx context.Context, w *fleetv1alpha1.Worker) (*appsv1.Deployment, *appsv1.Deployment, error) {
	primary, secondary := &appsv1.Deployment{}, &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, primary); client.IgnoreNotFound(err) != nil {
		return nil, nil, err
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: specs.SplitDeploymentName(w.Name)}, secondary); client.IgnoreNotFound(err) != nil {
		return nil, nil, err
	}
	if secondary.UID != "" && !metav1.IsControlledBy(secondary, w) {
		secondary = &appsv1.Deployment{}
	}
	return primary, secondary, nil
}

// versionWorker is w running its version id.
func (r *Reconciler) versionWorker(ctx context.Context, w *fleetv1alpha1.Worker, id string) (*fleetv1alpha1.Worker, error) {
	s, err := common.VersionSpec(ctx, r.Refs.Live, w, id)
	if err != nil {
		return nil, err
	}
	return common.WithVersion(w, s), nil
}

// withSplit gives the renderer s's split: the versions' shares and the Services of
// the pods p runs them in.
func (r *Reconciler) withSplit(w *fleetv1alpha1.Worker, s slot, p plan) func(*render.Input) {
	return func(in *render.Input) {
		if s.split == nil && !p.hopToken {
			return
		}
		split := &render.Split{Worker: w.Name, Self: s.version, TokenSecret: specs.SplitTokenSecretName(w.Name)}
		for _, v := range s.split {
			split.Versions = append(split.Versions, render.SplitVersion{ID: v.VersionID, Percentage: v.Percentage,
				Address: specs.RoleAddress(w, v.VersionID != p.primary.version, r.Options.ClusterDomain)})
		}
		in.Split = split
	}
}

// keptVersions prunes the stored versions beyond the kept ones and lists the rest.
func (r *Reconciler) keptVersions(ctx context.Context, w *fleetv1alpha1.Worker, deployed []fleetv1alpha1.DeploymentVersion, p plan) ([]fleetv1alpha1.WorkerVersion, error) {
	all, err := common.ListVersions(ctx, r.Client, w)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{w.Spec.VersionID(): true, p.primary.version: true, p.secondary.version: true}
	for _, v := range deployed {
		keep[v.VersionID] = true
	}
	for _, v := range append(w.Status.Deployment, w.Status.PreviousDeployment...) {
		keep[v.VersionID] = true
	}
	return common.PruneVersions(ctx, r.Client, w, all, keep)
}

// pruneConfigMaps deletes config versions no ReplicaSet of the Worker still runs.
func (r *Reconciler) pruneConfigMaps(ctx context.Context, w *fleetv1alpha1.Worker, current, secondary string) error {
	sel := client.MatchingLabels(specs.WorkerSelector(w.Name))
	rsList := &appsv1.ReplicaSetList{}
	if err := r.List(ctx, rsList, client.InNamespace(w.Namespace), sel); err != nil {
		return err
	}
	inUse := map[string]bool{current: true, secondary: true}
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
