package controller_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// shardGauges reads the manager registry's shard series of the store ns/name of kind:
// desired and ready, and whether each was present.
func shardGauges(t *testing.T, ns, kind, name string) (desired, ready float64, found int) {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != common.ShardsDesired && mf.GetName() != common.ShardsReady {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] != ns || l["kind"] != kind || l["name"] != name {
				continue
			}
			found++
			if mf.GetName() == common.ShardsDesired {
				desired = m.GetGauge().GetValue()
			} else {
				ready = m.GetGauge().GetValue()
			}
		}
	}
	return desired, ready, found
}

// TestShardsSeries: the manager's /metrics reports a DurableObjectNamespace's shards as
// spec.shards wants and as its StatefulSet reports them ready (the series the
// DurableObjectShardUnavailable alert compares, docs/alerts.md), and drops them once
// the namespace is gone.
func TestShardsSeries(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	if err := k8sClient.Create(ctx, counterWorker(ns, "w", "d")); err != nil {
		t.Fatal(err)
	}
	d := donsFixture(ns, "d", "w", 3, nil)
	if err := k8sClient.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	eventually(t, "the shard StatefulSet", func() error {
		return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.ShardSetName("d")}, sts)
	})
	// envtest runs no StatefulSet controller: the test reports 2 of 3 shards ready.
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 3, ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}
	if err := k8sClient.Status().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	eventually(t, "desired 3, ready 2", func() error {
		if desired, ready, n := shardGauges(t, ns, "DurableObjectNamespace", "d"); desired != 3 || ready != 2 || n != 2 {
			return fmt.Errorf("desired %v ready %v (%d series)", desired, ready, n)
		}
		return nil
	})
	if err := k8sClient.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the series gone with the namespace", func() error {
		if _, _, n := shardGauges(t, ns, "DurableObjectNamespace", "d"); n != 0 {
			return fmt.Errorf("%d series left", n)
		}
		return nil
	})
}
