package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// counterModule is a Worker with a SQLite-backed Durable Object class Counter:
// GET /inc?k=<name> adds one to that object's counter, GET /get?k=<name> reads it.
const counterModule = `import { DurableObject } from "cloudflare:workers";
export class Counter extends DurableObject {
  async increment(n) {
    const v = ((await this.ctx.storage.get("v")) ?? 0) + n;
    await this.ctx.storage.put("v", v);
    return v;
  }
  async value() { return (await this.ctx.storage.get("v")) ?? 0; }
}
export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    const stub = env.COUNTER.getByName(url.searchParams.get("k") ?? "c");
    const v = url.pathname === "/inc" ? await stub.increment(1) : await stub.value();
    return new Response(String(v));
  },
};
`

// counterClass is a Durable Object class Counter (of a module that imports
// DurableObject): increment(n) adds n to the object's stored value and returns it.
const counterClass = `export class Counter extends DurableObject {
  async increment(n) {
    const v = ((await this.ctx.storage.get("v")) ?? 0) + n;
    await this.ctx.storage.put("v", v);
    return v;
  }
}
`

// newCounterNamespace creates DurableObjectNamespace name (class Counter of Worker
// worker, reclaimPolicy Retain) and waits until it is Ready.
func newCounterNamespace(t *testing.T, name, worker string, shards int32) *fleetv1alpha1.DurableObjectNamespace {
	t.Helper()
	d := &fleetv1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: name},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{
			WorkerRef: fleetv1alpha1.LocalObjectReference{Name: worker}, ClassName: "Counter", SQL: true,
			Shards:  ptr.To(shards),
			Storage: &fleetv1alpha1.StorageSpec{ReclaimPolicy: fleetv1alpha1.ReclaimRetain},
		},
	}
	if err := k8sClient.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	waitReady(t, d, 4*time.Minute)
	return d
}

// waitReady waits until o has Ready=True at its current generation.
func waitReady(t *testing.T, o client.Object, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%T %s Ready", o, o.GetName()), func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		var conds []metav1.Condition
		var observed int64
		switch x := o.(type) {
		case *fleetv1alpha1.DurableObjectNamespace:
			conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
		case *fleetv1alpha1.Workflow:
			conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
		case *fleetv1alpha1.Worker:
			conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
		case *fleetv1alpha1.KVNamespace:
			conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
		case *fleetv1alpha1.D1Database:
			conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
		case *fleetv1alpha1.Queue:
			conds, observed = x.Status.Conditions, x.Status.ObservedGeneration
		}
		c := meta.FindStatusCondition(conds, fleetv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || observed != o.GetGeneration() {
			return fmt.Errorf("Ready %+v (generation %d, observed %d)", c, o.GetGeneration(), observed)
		}
		return nil
	})
}

// TestRetainedNamespaceKeepsData: a DurableObjectNamespace deleted with reclaimPolicy
// Retain and created again under the same name serves the data written before: same
// uniqueKey, same claims, same counter value.
func TestRetainedNamespaceKeepsData(t *testing.T) {
	ctx := context.Background()
	w := newWorker(t, "keeper", "", 1)
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec.Source.Inline.Modules[0].Content = ptr.To(counterModule)
	w.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "COUNTER", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: "kept"}}}
	if err := k8sClient.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	d := newCounterNamespace(t, "kept", "keeper", 2)
	key, uid := d.Status.UniqueKey, d.UID
	waitWorkerReady(t, "keeper")
	url := serviceURL(t, "keeper")
	const writes = 5
	for i := 1; i <= writes; i++ {
		for _, k := range []string{"a", "b"} {
			eventually(t, time.Minute, "increment", func() error { _, err := get(url + "/inc?k=" + k); return err })
		}
	}
	claims := claimUIDs(t, "kept")

	if err := k8sClient.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "namespace and shard pods gone", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), &fleetv1alpha1.DurableObjectNamespace{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there (%v)", err)
		}
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(sampleNS), client.MatchingLabels{"fleet.workerd-operator.io/durable-object-namespace": "kept"}); err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d shard pods left", len(pods.Items))
		}
		return nil
	})
	if after := claimUIDs(t, "kept"); fmt.Sprint(after) != fmt.Sprint(claims) {
		t.Fatalf("claims after delete %v, before %v: Retain should keep them", after, claims)
	}

	d = newCounterNamespace(t, "kept", "keeper", 2)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), d) })
	if d.UID == uid || d.Status.UniqueKey != key {
		t.Fatalf("re-created: uid %s (was %s), uniqueKey %q (was %q)", d.UID, uid, d.Status.UniqueKey, key)
	}
	for _, k := range []string{"a", "b"} {
		var body string
		eventually(t, 2*time.Minute, "read back "+k, func() (err error) { body, err = get(url + "/get?k=" + k); return err })
		if strings.TrimSpace(body) != fmt.Sprint(writes) {
			t.Errorf("counter %s after re-creation = %q, want %d", k, body, writes)
		}
		t.Logf("counter %s after re-creation: %s (uniqueKey %s)", k, body, key)
	}
	if after := claimUIDs(t, "kept"); fmt.Sprint(after) != fmt.Sprint(claims) {
		t.Errorf("claims after re-creation %v, before %v: the new shards should reuse them", after, claims)
	}
}

// claimUIDs lists "<claim>=<uid>" of the shard claims of namespace name, sorted by name.
func claimUIDs(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for i := 0; i < 2; i++ {
		c := &corev1.PersistentVolumeClaim{}
		n := fmt.Sprintf("data-%s-%d", render.ShardSetName(name), i)
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: n}, c); err != nil {
			t.Fatalf("claim %s: %v", n, err)
		}
		out = append(out, n+"="+string(c.UID))
	}
	return out
}
