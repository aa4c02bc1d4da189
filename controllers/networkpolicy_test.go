package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// Each Worker, DurableObjectNamespace and Workflow gets the NetworkPolicy of its pods
// (specs.buildNetworkPolicy), controlled by it; with the switch off it is deleted, and
// a reconciler with it on puts it back.
func TestNetworkPolicyChildren(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := counterWorker(ns, "app", "rooms")
	w.Spec.Bindings = append(w.Spec.Bindings, orderWorker(ns, "", "orders").Spec.Bindings...)
	d := donsFixture(ns, "rooms", "app", 1, nil)
	wf := workflowFixture(ns, "orders", "app")
	for _, o := range []client.Object{w, d, wf} {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]client.Object{w.Name: w, render.ShardSetName(d.Name): d, render.EngineSetName(wf.Name): wf}
	selectors := map[string]map[string]string{w.Name: specs.WorkerSelector(w.Name),
		render.ShardSetName(d.Name): specs.DONSSelector(d), render.EngineSetName(wf.Name): specs.WorkflowSelector(wf.Name)}
	for name, owner := range want {
		np := &networkingv1.NetworkPolicy{}
		eventually(t, "NetworkPolicy "+name, func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, np)
		})
		if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != owner.GetUID() {
			t.Errorf("NetworkPolicy %s controller %+v, want %s", name, ref, owner.GetName())
		}
		if got := np.Spec.PodSelector.MatchLabels; fmt.Sprint(got) != fmt.Sprint(selectors[name]) {
			t.Errorf("NetworkPolicy %s selects %v, want %v", name, got, selectors[name])
		}
		// Off deletes the one it made; this suite's reconcilers (on) then make a new one.
		uid := np.UID
		if err := common.SyncNetworkPolicy(ctx, k8sClient, owner, np.DeepCopy(), false); err != nil {
			t.Fatal(err)
		}
		eventually(t, "NetworkPolicy "+name+" deleted and made again", func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
				return err
			}
			if np.UID == uid {
				return fmt.Errorf("not deleted")
			}
			return nil
		})
	}
}

// A NetworkPolicy named like a Worker that the Worker does not control is neither
// taken over nor deleted: the Worker reports it.
func TestNetworkPolicyNotTakenOver(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	theirs := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if err := k8sClient.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	w := workerFixture(ns, "taken")
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Ready=False naming the NetworkPolicy", func() error {
		got := getWorker(t, client.ObjectKeyFromObject(w))
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "NetworkPolicy taken exists and is not controlled") {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	np := &networkingv1.NetworkPolicy{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), np); err != nil {
		t.Fatal(err)
	}
	if len(np.OwnerReferences) != 0 || len(np.Spec.Ingress) != 0 {
		t.Errorf("the NetworkPolicy was changed: %+v", np)
	}
	if err := common.SyncNetworkPolicy(ctx, k8sClient, w, np.DeepCopy(), false); err != nil {
		t.Errorf("SyncNetworkPolicy(off) on a NetworkPolicy not controlled: %v", err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), np); err != nil {
		t.Errorf("SyncNetworkPolicy(off) deleted a NetworkPolicy it does not control: %v", err)
	}
}
