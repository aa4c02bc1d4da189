package controller_test

import (
	"context"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/workerd-operator/workerd-operator/internal/render"
)

// A DurableObjectNamespace's shards get a PodDisruptionBudget of the StatefulSet's name
// (https://kubernetes.io/docs/tasks/run-application/configure-pdb/): maxUnavailable 1
// over the set's selector, AlwaysAllow for unhealthy pods, controlled by the namespace
// like the set (the garbage collector deletes it with its owner); and the set's pods
// spread over nodes as a preference
// (https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/).
func TestDurableObjectNamespaceDisruptionBudget(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	if err := k8sClient.Create(ctx, counterWorker(ns, "chat", "rooms")); err != nil {
		t.Fatal(err)
	}
	d := donsFixture(ns, "rooms", "chat", 2, nil)
	if err := k8sClient.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: render.ShardSetName(d.Name)}
	pdb, sts := &policyv1.PodDisruptionBudget{}, &appsv1.StatefulSet{}
	eventually(t, "the shards' PodDisruptionBudget", func() error {
		if err := k8sClient.Get(ctx, key, sts); err != nil {
			return err
		}
		return k8sClient.Get(ctx, key, pdb)
	})
	if p := pdb.Spec; p.MaxUnavailable == nil || *p.MaxUnavailable != intstr.FromInt32(1) || p.MinAvailable != nil {
		t.Errorf("maxUnavailable %v minAvailable %v, want maxUnavailable 1", p.MaxUnavailable, p.MinAvailable)
	}
	if !reflect.DeepEqual(pdb.Spec.Selector, sts.Spec.Selector) {
		t.Errorf("selector %v, want the StatefulSet's %v", pdb.Spec.Selector, sts.Spec.Selector)
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", p)
	}
	d = getDONS(t, types.NamespacedName{Namespace: ns, Name: d.Name})
	if !metav1.IsControlledBy(pdb, d) || !reflect.DeepEqual(pdb.OwnerReferences, sts.OwnerReferences) {
		t.Errorf("ownerReferences %+v, want the StatefulSet's %+v (controller: the namespace)", pdb.OwnerReferences, sts.OwnerReferences)
	}
	tsc := sts.Spec.Template.Spec.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != "kubernetes.io/hostname" || tsc[0].MaxSkew != 1 ||
		tsc[0].WhenUnsatisfiable != "ScheduleAnyway" || !reflect.DeepEqual(tsc[0].LabelSelector, sts.Spec.Selector) {
		t.Errorf("topologySpreadConstraints %+v, want one on kubernetes.io/hostname, maxSkew 1, ScheduleAnyway, the set's selector", tsc)
	}
}
