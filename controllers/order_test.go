package controller_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// siblingsModule holds the classes of two DurableObjectNamespaces and two Workflows.
const siblingsModule = `import { DurableObject, WorkflowEntrypoint } from "cloudflare:workers";
export class Counter extends DurableObject { async increment(n) { return n } }
export class Tally extends DurableObject { async add(n) { return n } }
export class OrderWorkflow extends WorkflowEntrypoint { async run(event, step) { return step.do("a", async () => 1) } }
export class RefundWorkflow extends WorkflowEntrypoint { async run(event, step) { return step.do("b", async () => 2) } }
export default { async fetch(req, env) { return new Response("ok") } }`

// siblings are a Worker binding two DurableObjectNamespaces and two Workflows whose
// classes it holds, and a CronSchedule starting one of the Workflows; each depends on
// the others being there. Short names for test output: W, D1, D2, F1, F2, C.
func siblings(ns string) ([]client.Object, []string) {
	w := workerFixture(ns, "app", func(w *fleetv1alpha1.Worker) {
		w.Spec.Source.Inline.Modules[0].Content = ptr.To(siblingsModule)
		w.Spec.Bindings = []fleetv1alpha1.Binding{
			{Name: "COUNTER", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: "counter"}},
			{Name: "TALLY", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: "tally"}},
			{Name: "ORDERS", Workflow: &fleetv1alpha1.LocalObjectReference{Name: "orders"}},
			{Name: "REFUNDS", Workflow: &fleetv1alpha1.LocalObjectReference{Name: "refunds"}},
		}
	})
	d1 := donsFixture(ns, "counter", "app", 1, nil)
	d2 := donsFixture(ns, "tally", "app", 1, nil)
	d2.Spec.ClassName = "Tally"
	f1 := workflowFixture(ns, "orders", "app")
	f2 := workflowFixture(ns, "refunds", "app")
	f2.Spec.ClassName = "RefundWorkflow"
	c := &fleetv1alpha1.CronSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: fleetv1alpha1.CronScheduleSpec{
			// Once a year: no slot comes due while the test runs.
			Schedules: []string{"0 0 1 1 *"},
			Target:    fleetv1alpha1.CronTarget{WorkflowRef: &fleetv1alpha1.LocalObjectReference{Name: "refunds"}},
		},
	}
	return []client.Object{w, d1, d2, f1, f2, c}, []string{"W", "D1", "D2", "F1", "F2", "C"}
}

// settled reports why obj is not settled yet (nil when it is): its last pass succeeded
// for its current generation (status.observedGeneration), and its Ready condition does
// not wait for a missing or refused input. envtest runs no pods, so Ready itself stays
// False (PodsUnavailable, RollingOut) for the kinds with pods; a CronSchedule's Ready
// is True once its target exists.
func settled(ctx context.Context, obj client.Object) error {
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	var observed int64
	var conds []metav1.Condition
	switch o := obj.(type) {
	case *fleetv1alpha1.Worker:
		observed, conds = o.Status.ObservedGeneration, o.Status.Conditions
	case *fleetv1alpha1.DurableObjectNamespace:
		observed, conds = o.Status.ObservedGeneration, o.Status.Conditions
	case *fleetv1alpha1.Workflow:
		observed, conds = o.Status.ObservedGeneration, o.Status.Conditions
	case *fleetv1alpha1.CronSchedule:
		observed, conds = o.Status.ObservedGeneration, o.Status.Conditions
	}
	ready := meta.FindStatusCondition(conds, fleetv1alpha1.ConditionReady)
	switch {
	case ready == nil:
		return errors.New("no Ready condition")
	case ready.Reason == fleetv1alpha1.ReasonReferenceNotFound || ready.Reason == fleetv1alpha1.ReasonInvalidSpec ||
		ready.Reason == fleetv1alpha1.ReasonReconcileError:
		return fmt.Errorf("Ready %s %s: %s", ready.Status, ready.Reason, ready.Message)
	case observed != obj.GetGeneration():
		return fmt.Errorf("observedGeneration %d, generation %d (Ready %s %s)", observed, obj.GetGeneration(), ready.Status, ready.Reason)
	}
	return nil
}

// createInOrder creates the siblings in a fresh namespace in order (a short pause
// between creates, so that each reconciler sees the objects created so far, as a
// directory applied by GitOps), and returns how long after the last create every
// object settled; an error when one did not within limit.
func createInOrder(ctx context.Context, order []int, limit time.Duration) (time.Duration, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "order-"}}
	if err := k8sClient.Create(ctx, ns); err != nil {
		return 0, err
	}
	objs, _ := siblings(ns.Name)
	for i, k := range order {
		if i > 0 {
			time.Sleep(150 * time.Millisecond)
		}
		if err := k8sClient.Create(ctx, objs[k]); err != nil {
			return 0, err
		}
	}
	last := time.Now()
	for {
		var errs []string
		for i, obj := range objs {
			if err := settled(ctx, obj); err != nil {
				errs = append(errs, fmt.Sprintf("%s %s: %v", kindOf(i), obj.GetName(), err))
			}
		}
		took := time.Since(last)
		if len(errs) == 0 {
			return took, nil
		}
		if took > limit {
			return took, fmt.Errorf("namespace %s, not settled %s after the last create: %s", ns.Name, took.Round(time.Millisecond), strings.Join(errs, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func kindOf(i int) string {
	_, names := siblings("")
	return names[i]
}

// TestAnyCreationOrder creates a Worker, the two DurableObjectNamespaces and two
// Workflows it binds and a CronSchedule starting one of the Workflows, in the forward
// and reverse orders and a seeded random sample of the 720 others, and checks that
// every object's pass succeeds within 30 s of the last create, whatever came first:
// an object blocked on a missing sibling is woken by its creation (watches through the
// Worker's bindings) or by its backoff, never left waiting for an event that does not
// come.
func TestAnyCreationOrder(t *testing.T) {
	const seed, samples, limit = 18, 100, 30 * time.Second
	rng := rand.New(rand.NewPCG(seed, seed))
	orders := [][]int{{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}}
	for range samples {
		orders = append(orders, rng.Perm(6))
	}
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		slowest time.Duration
		slow    string
		running = make(chan struct{}, 8)
	)
	for _, order := range orders {
		names := make([]string, len(order))
		for i, k := range order {
			names[i] = kindOf(k)
		}
		name := strings.Join(names, ",")
		wg.Add(1)
		running <- struct{}{}
		go func() {
			defer func() { <-running; wg.Done() }()
			took, err := createInOrder(ctx, order, limit)
			if err != nil {
				t.Errorf("order %s: %v", name, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if took > slowest {
				slowest, slow = took, name
			}
		}()
	}
	wg.Wait()
	t.Logf("seed %d, %d orders; slowest to settle after its last create: %s (%s)", seed, len(orders), slowest.Round(time.Millisecond), slow)
}
