package datastore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// store is one KVNamespace, D1Database or Queue seen through what the reconciler needs:
// the object, its status, its storage, and what its host renders from its spec.
type store struct {
	obj     client.Object
	status  *fleetv1alpha1.DataStoreStatus
	storage *fleetv1alpha1.StorageSpec
	// backup is spec.backup and spec.restore as the pods need them.
	backup specs.StoreBackup
	d1     *fleetv1alpha1.D1Database
	// lastMigration is the last migration file the host applies ("" without any).
	lastMigration string
	// consumer is a Queue's consumer Worker ("" without one).
	consumer string
}

func (r *Reconciler) newStore() *store {
	switch r.Kind {
	case render.DataKV:
		o := &fleetv1alpha1.KVNamespace{}
		return &store{obj: o, status: &o.Status}
	case render.DataD1:
		o := &fleetv1alpha1.D1Database{}
		return &store{obj: o, status: &o.Status.DataStoreStatus, d1: o}
	}
	o := &fleetv1alpha1.Queue{}
	return &store{obj: o, status: &o.Status}
}

// host completes h from the spec (storage; a D1Database's migrations, read from their
// ConfigMap with live, the API server: a missing one is Blocked).
func (s *store) host(ctx context.Context, c client.Client, live client.Reader, h *render.DataHost) error {
	switch o := s.obj.(type) {
	case *fleetv1alpha1.KVNamespace:
		s.storage = o.Spec.Storage
		s.backup = specs.StoreBackup{Backup: o.Spec.Backup, Restore: o.Spec.Restore, Path: o.BackupPath()}
	case *fleetv1alpha1.Queue:
		s.storage = o.Spec.Storage
		s.backup = specs.StoreBackup{Backup: o.Spec.Backup, Restore: o.Spec.Restore, Path: o.BackupPath()}
		if len(o.Spec.Consumers) > 0 {
			s.consumer = o.Spec.Consumers[0].Worker
			h.Consumer = render.QueueConsumerOf(o.Spec.Consumers[0])
			return s.deadLetters(ctx, c, o, h)
		}
	case *fleetv1alpha1.D1Database:
		s.storage = o.Spec.Storage
		s.backup = specs.StoreBackup{Backup: o.Spec.Backup, Restore: o.Spec.Restore, Path: o.BackupPath()}
		m := o.Spec.Migrations
		if m == nil {
			return nil
		}
		cm := &corev1.ConfigMap{}
		err := live.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: m.ConfigMap.Name}, cm)
		if apierrors.IsNotFound(err) {
			return common.Blocked(fleetv1alpha1.ReasonConfigMapNotFound,
				fmt.Sprintf("spec.migrations.configMap: ConfigMap %q not found in namespace %q", m.ConfigMap.Name, o.Namespace))
		}
		if err != nil {
			return err
		}
		h.Migrations, h.MigrationsTable = render.MigrationsOf(cm.Data), m.Table
		if n := len(h.Migrations); n > 0 {
			s.lastMigration = h.Migrations[n-1].Name
		}
	}
	return nil
}

// deadLetters sets h.DeadLetterConsumer when the Queue named by the consumer's
// deadLetterQueue exists and is consumed by the same Worker: its consumer then receives
// the dead letters kept in this store (docs/queues.md "Dead letters").
func (s *store) deadLetters(ctx context.Context, c client.Client, o *fleetv1alpha1.Queue, h *render.DataHost) error {
	name := o.Spec.Consumers[0].DeadLetterQueue
	if name == "" {
		return nil
	}
	dlq := &fleetv1alpha1.Queue{}
	err := c.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: name}, dlq)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(dlq.Spec.Consumers) > 0 && dlq.Spec.Consumers[0].Worker == s.consumer {
		h.DeadLetterConsumer = render.QueueConsumerOf(dlq.Spec.Consumers[0])
	}
	return nil
}

// write writes st (and, for a D1Database whose host is ready, the last migration its
// host applied before it became ready).
func (s *store) write(ctx context.Context, c client.Client, st fleetv1alpha1.DataStoreStatus) error {
	if s.d1 == nil {
		return common.WriteStatus(ctx, c, s.obj, s.status, st)
	}
	d1 := *s.d1.Status.DeepCopy()
	d1.DataStoreStatus = st
	if meta.IsStatusConditionTrue(st.Conditions, fleetv1alpha1.ConditionReady) {
		d1.LastMigration = s.lastMigration
	}
	return common.WriteStatus(ctx, c, s.obj, &s.d1.Status, d1)
}
