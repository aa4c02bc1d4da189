package controller

import (
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/controllers/cronschedule"
	"github.com/workerd-operator/workerd-operator/controllers/datastore"
	"github.com/workerd-operator/workerd-operator/controllers/durableobjectnamespace"
	"github.com/workerd-operator/workerd-operator/controllers/r2bucket"
	"github.com/workerd-operator/workerd-operator/controllers/worker"
	"github.com/workerd-operator/workerd-operator/controllers/workflow"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// SetupAll registers everything the operator reconciles with mgr: the field indexes,
// the reconcilers of Workers, DurableObjectNamespaces and Workflows, the scan of the
// Workers' workerd logs for failures every logScan (manager flag
// --failure-log-scan-interval; 0: off; leader only) and the CronSchedule dispatcher
// (leader only). namespaces are the watched namespaces (as given to CacheOptions; none:
// every namespace), where the references the operator does not label are watched
// (common.References). cron's APIReader, Recorder, Log and Workflows default to the
// manager's reader, an event recorder, a named logger and the engine starter.
func SetupAll(mgr ctrl.Manager, opts specs.Options, cron cronschedule.DispatcherOptions, namespaces []string, logScan time.Duration) error {
	if err := common.SetupIndexes(mgr); err != nil {
		return err
	}
	refs, err := common.NewReferences(mgr, watched(namespaces, opts.ManagerNamespace))
	if err != nil {
		return err
	}
	logs, err := workerLogScanner(mgr, logScan)
	if err != nil {
		return err
	}
	events := common.Events{Recorder: mgr.GetEventRecorder(common.EventRecorderName)}
	if err := (&worker.Reconciler{Client: mgr.GetClient(), Options: opts, Events: events, Refs: refs, Logs: logs}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&durableobjectnamespace.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Options: opts, Events: events, Refs: refs}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&workflow.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Options: opts, Events: events, Refs: refs}).SetupWithManager(mgr); err != nil {
		return err
	}
	for _, kind := range []render.DataKind{render.DataKV, render.DataD1, render.DataQueue} {
		if err := (&datastore.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Options: opts, Events: events, Kind: kind, Refs: refs}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if err := common.RegisterShardsCollector(mgr.GetClient()); err != nil {
		return err
	}
	if err := (&r2bucket.Reconciler{Client: mgr.GetClient(), Events: events, Refs: refs}).SetupWithManager(mgr); err != nil {
		return err
	}
	if cron.APIReader == nil {
		cron.APIReader = mgr.GetAPIReader()
	}
	if cron.Recorder == nil {
		cron.Recorder = mgr.GetEventRecorder("cron-dispatcher")
	}
	if cron.Log.GetSink() == nil {
		cron.Log = ctrl.Log.WithName("cron-dispatcher")
	}
	if cron.Workflows == nil {
		cron.Workflows = &cronschedule.EngineStarter{Client: mgr.GetClient(), Issuer: opts.Issuer}
	}
	if cron.Issuer == nil {
		cron.Issuer = opts.Issuer
	}
	return mgr.Add(cronschedule.NewDispatcher(mgr.GetClient(), cron))
}

// workerLogScanner adds the scan of the Worker pods' workerd logs to mgr, reading logs
// with a clientset (pods/log is a subresource the cached client does not serve); nil
// when interval is not positive (off).
func workerLogScanner(mgr ctrl.Manager, interval time.Duration) (*common.LogScanner, error) {
	if interval <= 0 {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	s := common.NewLogScanner(cs.CoreV1(), mgr.GetClient(), interval, podcontract.LabelWorker, podcontract.ComponentWorker, ctrl.Log.WithName("failure-log-scan"))
	return s, mgr.Add(s)
}

// CacheOptions are the manager's cache options. It holds only the Pods, ConfigMaps
// and Secrets the operator labels (podcontract.LabelManagedBy), not every one of the
// cluster: those a Worker references are read through common.References. With
// namespaces (manager flag --watch-namespaces) the cache lists and watches objects of
// those namespaces and of managerNamespace (where the manager keeps its own records)
// only, so that Roles there suffice; Namespaces, which are cluster-scoped, are still
// read cluster-wide. Without: every namespace. No cached object keeps its managed
// fields, which nothing reads from the cache (server-side apply computes them on the
// server) and which weigh as much as the rest of a Deployment.
func CacheOptions(namespaces []string, managerNamespace string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{podcontract.LabelManagedBy: podcontract.ManagedBy})
	opts := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:         {Label: managed, Transform: podMeta},
		&corev1.ConfigMap{}:   {Label: managed, Transform: configMapMeta},
		&corev1.Secret{}:      {Label: managed, Transform: secretMeta},
		&appsv1.Deployment{}:  {Transform: workloadMeta},
		&appsv1.StatefulSet{}: {Transform: workloadMeta},
		&appsv1.ReplicaSet{}:  {Transform: workloadMeta},
	}}
	if len(namespaces) == 0 {
		return opts
	}
	opts.DefaultNamespaces = map[string]cache.Config{}
	for _, ns := range watched(namespaces, managerNamespace) {
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	return opts
}

// watched are the namespaces the caches hold: namespaces and managerNamespace; none
// (every namespace) without namespaces.
func watched(namespaces []string, managerNamespace string) []string {
	if len(namespaces) == 0 {
		return nil
	}
	var out []string
	for _, ns := range append(slices.Clone(namespaces), managerNamespace) {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// Any tenant can put the managed-by label on its own objects, so the cache keeps of
// them only what the reconcilers read: no Pod's spec or annotations, no ConfigMap's data (the rendered ones are
// applied, never read back; a D1Database's migrations are read live), a Secret's
// data only for the internal TLS Secrets the operator reads, and no managedFields.
// A tenant's labelled ConfigMaps then cost the manager their metadata, not their data.

// podMeta keeps of a Pod what the reconcilers, the log scan and the cron dispatcher
// read: its name, the operator's labels (at most maxPodLabels) and its status. Its
// spec, annotations, other labels, owners, finalizers and managed fields, which a
// tenant's labelled Pod could fill, are dropped.
func podMeta(o any) (any, error) {
	if p, ok := o.(*corev1.Pod); ok {
		p.ManagedFields, p.Annotations, p.OwnerReferences, p.Finalizers = nil, nil, nil, nil
		p.Spec = corev1.PodSpec{}
		p.Labels = operatorLabels(p.Labels)
	}
	return o, nil
}

// maxPodLabels bounds the labels kept of a cached Pod: the operator sets fewer.
const maxPodLabels = 16

func operatorLabels(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if len(out) < maxPodLabels && (strings.HasPrefix(k, podcontract.OperatorLabelPrefix) || strings.HasPrefix(k, "app.kubernetes.io/")) {
			out[k] = v
		}
	}
	return out
}

// workloadMeta keeps of a Deployment, StatefulSet or ReplicaSet what the reconcilers
// read: everything but its pod template's spec, of which only the volumes (a
// ReplicaSet's config version). At 10,000 Workers the pod specs were a quarter of the
// manager's live heap; the children are applied whole (server-side apply) and patched
// only by merge patches of the kept fields, never updated from the cache.
func workloadMeta(o any) (any, error) {
	var t *corev1.PodTemplateSpec
	switch w := o.(type) {
	case *appsv1.Deployment:
		w.ManagedFields, t = nil, &w.Spec.Template
	case *appsv1.StatefulSet:
		w.ManagedFields, t = nil, &w.Spec.Template
	case *appsv1.ReplicaSet:
		w.ManagedFields, t = nil, &w.Spec.Template
	default:
		return o, nil
	}
	t.Spec = corev1.PodSpec{Volumes: t.Spec.Volumes}
	return o, nil
}

func configMapMeta(o any) (any, error) {
	if cm, ok := o.(*corev1.ConfigMap); ok {
		cm.Data, cm.BinaryData, cm.ManagedFields = nil, nil, nil
	}
	return o, nil
}

func secretMeta(o any) (any, error) {
	if s, ok := o.(*corev1.Secret); ok {
		s.ManagedFields = nil
		if s.Name != podcontract.InternalTLSSecret && s.Name != podcontract.ManagerCASecret {
			s.Data, s.StringData = nil, nil
		}
	}
	return o, nil
}
