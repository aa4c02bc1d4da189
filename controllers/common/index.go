package common

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Field indexes on Workers, used to map a changed Secret, ConfigMap, Worker,
// DurableObjectNamespace or Workflow to the Workers that reference it, and on
// DurableObjectNamespaces and Workflows by the Worker whose code they run.
const (
	IndexWorkerSecrets     = ".spec.bindings.secretKeyRef.name"
	IndexWorkerConfigMap   = ".spec.source.configMap.name"
	IndexWorkerServiceRef  = ".spec.bindings.service.name"
	IndexWorkerDONSRef     = ".spec.bindings.durableObjectNamespace.name"
	IndexWorkerWorkflowRef = ".spec.bindings.workflow.name"
	IndexWorkerR2BucketRef = ".spec.bindings.r2Bucket.name"
	IndexWorkerRef         = ".spec.workerRef.name"
	IndexWorkerKVRef       = ".spec.bindings.kvNamespace.name"
	IndexWorkerD1Ref       = ".spec.bindings.d1Database.name"
	IndexWorkerQueueRef    = ".spec.bindings.queue.name"
	// IndexQueueDeadLetter indexes Queues by their consumer's deadLetterQueue.
	IndexQueueDeadLetter = ".spec.consumers.deadLetterQueue"
	// IndexD1MigrationsConfigMap indexes D1Databases by their migrations ConfigMap.
	IndexD1MigrationsConfigMap = ".spec.migrations.configMap.name"
)

// MaxConcurrentReconciles is how many objects of one kind are reconciled at once:
// passes are I/O-bound (a few API calls each).
const MaxConcurrentReconciles = 4

// SetupIndexes registers every field index of the reconcilers, once per manager.
func SetupIndexes(mgr ctrl.Manager) error {
	if err := setupWorkerIndexes(mgr); err != nil {
		return err
	}
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleetv1alpha1.DurableObjectNamespace{}, IndexWorkerRef, func(o client.Object) []string {
		return []string{o.(*fleetv1alpha1.DurableObjectNamespace).Spec.WorkerRef.Name}
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleetv1alpha1.Queue{}, IndexQueueDeadLetter, func(o client.Object) []string {
		var out []string
		for _, c := range o.(*fleetv1alpha1.Queue).Spec.Consumers {
			if c.DeadLetterQueue != "" {
				out = append(out, c.DeadLetterQueue)
			}
		}
		return out
	}); err != nil {
		return err
	}
	// A Queue's host runs its consumer's code, as a shard runs its workerRef's.
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleetv1alpha1.Queue{}, IndexWorkerRef, func(o client.Object) []string {
		var out []string
		for _, c := range o.(*fleetv1alpha1.Queue).Spec.Consumers {
			out = append(out, c.Worker)
		}
		return out
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleetv1alpha1.D1Database{}, IndexD1MigrationsConfigMap, func(o client.Object) []string {
		if m := o.(*fleetv1alpha1.D1Database).Spec.Migrations; m != nil {
			return []string{m.ConfigMap.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &fleetv1alpha1.Workflow{}, IndexWorkerRef, func(o client.Object) []string {
		return []string{o.(*fleetv1alpha1.Workflow).Spec.WorkerRef.Name}
	})
}

// setupWorkerIndexes indexes Workers by every object they reference: one index per kind
// of object a binding names, and the source ConfigMap.
func setupWorkerIndexes(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	for _, ix := range []struct{ name, kind string }{
		{IndexWorkerSecrets, fleetv1alpha1.ReferenceSecret},
		{IndexWorkerServiceRef, fleetv1alpha1.ReferenceWorker},
		{IndexWorkerDONSRef, fleetv1alpha1.ReferenceDurableObjectNamespace},
		{IndexWorkerWorkflowRef, fleetv1alpha1.ReferenceWorkflow},
		{IndexWorkerKVRef, fleetv1alpha1.ReferenceKVNamespace},
		{IndexWorkerD1Ref, fleetv1alpha1.ReferenceD1Database},
		{IndexWorkerQueueRef, fleetv1alpha1.ReferenceQueue},
		{IndexWorkerR2BucketRef, fleetv1alpha1.ReferenceR2Bucket},
	} {
		if err := idx.IndexField(ctx, &fleetv1alpha1.Worker{}, ix.name, func(o client.Object) []string {
			return o.(*fleetv1alpha1.Worker).ReferencedNames(ix.kind)
		}); err != nil {
			return err
		}
	}
	return idx.IndexField(ctx, &fleetv1alpha1.Worker{}, IndexWorkerConfigMap, func(o client.Object) []string {
		if cm := o.(*fleetv1alpha1.Worker).Spec.Source.ConfigMap; cm != nil {
			return []string{cm.Name}
		}
		return nil
	})
}

// WatchWorkerReaders adds to b the watches of an object that renders a Worker
// (RenderWorker) and lists as L (DurableObjectNamespaces, Workflows) by IndexWorkerRef:
// a change of the Worker, of a Worker it binds as a service, of a
// DurableObjectNamespace or Workflow it binds, of a Secret or of its source ConfigMap
// requeues every L whose spec.workerRef names that Worker (Secrets and ConfigMaps
// through refs, which caches their metadata). So an object waiting for a
// sibling its Worker binds is woken when the sibling is created.
func WatchWorkerReaders[L any, PL interface {
	*L
	client.ObjectList
}](b *builder.Builder, c client.Reader, refs *References) *builder.Builder {
	specChanged := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return b.
		Watches(&fleetv1alpha1.Worker{}, handler.EnqueueRequestsFromMapFunc(workerReaders[L, PL](c, true, IndexWorkerServiceRef)), specChanged).
		Watches(&fleetv1alpha1.DurableObjectNamespace{}, handler.EnqueueRequestsFromMapFunc(workerReaders[L, PL](c, false, IndexWorkerDONSRef)), specChanged).
		Watches(&fleetv1alpha1.Workflow{}, handler.EnqueueRequestsFromMapFunc(workerReaders[L, PL](c, false, IndexWorkerWorkflowRef)), specChanged).
		Watches(&fleetv1alpha1.KVNamespace{}, handler.EnqueueRequestsFromMapFunc(workerReaders[L, PL](c, false, IndexWorkerKVRef)), specChanged).
		Watches(&fleetv1alpha1.D1Database{}, handler.EnqueueRequestsFromMapFunc(workerReaders[L, PL](c, false, IndexWorkerD1Ref)), specChanged).
		Watches(&fleetv1alpha1.Queue{}, handler.EnqueueRequestsFromMapFunc(workerReaders[L, PL](c, false, IndexWorkerQueueRef)), specChanged).
		Watches(&fleetv1alpha1.R2Bucket{}, handler.EnqueueRequestsFromMapFunc(workerReaders[L, PL](c, false, IndexWorkerR2BucketRef)), specChanged).
		WatchesRawSource(refs.Watch("Secret", workerReaders[L, PL](c, false, IndexWorkerSecrets))).
		WatchesRawSource(refs.Watch("ConfigMap", workerReaders[L, PL](c, false, IndexWorkerConfigMap)))
}

// workerReaders maps an object o to the objects of list type L whose spec.workerRef
// names a Worker that reads o through one of workerIndexes, or, with self, o itself
// (o is a Worker).
func workerReaders[L any, PL interface {
	*L
	client.ObjectList
}](c client.Reader, self bool, workerIndexes ...string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, w := range workersReading(ctx, c, o, self, workerIndexes) {
			reqs = append(reqs, Referencing[L, PL](c, IndexWorkerRef)(ctx, w)...)
		}
		return reqs
	}
}

// workersReading lists the Workers in o's namespace that reference o through one of
// indexes, and o itself with self.
func workersReading(ctx context.Context, c client.Reader, o client.Object, self bool, indexes []string) []client.Object {
	var ws []client.Object
	if self {
		ws = append(ws, o)
	}
	for _, index := range indexes {
		list := &fleetv1alpha1.WorkerList{}
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			continue
		}
		for i := range list.Items {
			ws = append(ws, &list.Items[i])
		}
	}
	return ws
}

// Referencing maps an object to the objects of list type L in its namespace whose
// field index holds the object's name (e.g. the Workers binding a Workflow).
func Referencing[L any, PL interface {
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

// PodOwner maps a pod to its owner through the owner label of its component.
func PodOwner(ownerLabel, component string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[podcontract.LabelComponent] != component || l[ownerLabel] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[ownerLabel]}}}
	}
}
