package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// handMadeService is a Service someone created without the operator.
func handMadeService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "payments"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "payments"},
			Ports:    []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromInt32(8000)}},
		},
	}
}

// TestWorkerDoesNotAdoptForeignChildren: a Worker named after an existing Service (its
// http Service "<name>", or its rpc Service "<name>-rpc") leaves that Service as it
// is, applies none of its children, and reports Ready=False with reason ChildConflict
// naming the Service, with a Warning Event.
func TestWorkerDoesNotAdoptForeignChildren(t *testing.T) {
	for _, c := range []struct{ worker, service string }{
		{"foo", "foo"},
		{"bar", "bar-rpc"},
	} {
		t.Run(c.service, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			svc := handMadeService(ns, c.service)
			if err := k8sClient.Create(ctx, svc); err != nil {
				t.Fatal(err)
			}
			before := svc.DeepCopy()
			w := workerFixture(ns, c.worker)
			if err := k8sClient.Create(ctx, w); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKeyFromObject(w)
			want := fmt.Sprintf("Service %q", c.service)
			eventually(t, "Ready=False ChildConflict", func() error {
				r := meta.FindStatusCondition(getWorker(t, key).Status.Conditions, fleetv1alpha1.ConditionReady)
				if r == nil || r.Status != metav1.ConditionFalse || r.Reason != fleetv1alpha1.ReasonChildConflict || !strings.Contains(r.Message, want) {
					return fmt.Errorf("Ready %+v, want False, reason %s, naming %s", r, fleetv1alpha1.ReasonChildConflict, want)
				}
				return nil
			})
			eventually(t, "a ChildConflict Event", func() error { return conflictEvent(ctx, ns, c.worker, want) })
			assertServiceUntouched(t, before)
			if _, err := getDeployment(key); !apierrors.IsNotFound(err) {
				t.Errorf("Deployment of the blocked Worker: %v, want none applied", err)
			}
		})
	}
}

// conflictEvent finds the Warning Event of reason ChildConflict on Worker ns/name whose
// note contains want.
func conflictEvent(ctx context.Context, ns, name, want string) error {
	evs := &eventsv1.EventList{}
	if err := k8sClient.List(ctx, evs, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Reason == fleetv1alpha1.ReasonChildConflict && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, want) {
			return nil
		}
	}
	return fmt.Errorf("no Warning Event %s naming %s among %d", fleetv1alpha1.ReasonChildConflict, want, len(evs.Items))
}

// assertServiceUntouched checks that the live Service still has the selector, ports,
// labels and owners (none) it was created with, and no field of the operator.
func assertServiceUntouched(t *testing.T, before *corev1.Service) {
	t.Helper()
	got := &corev1.Service{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: before.Namespace, Name: before.Name}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 {
		t.Errorf("owner references %+v added to a Service the operator does not control", got.OwnerReferences)
	}
	if fmt.Sprint(got.Spec.Selector) != fmt.Sprint(before.Spec.Selector) || len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 80 {
		t.Errorf("spec changed: selector %v, ports %+v", got.Spec.Selector, got.Spec.Ports)
	}
	if fmt.Sprint(got.Labels) != fmt.Sprint(before.Labels) {
		t.Errorf("labels changed: %v", got.Labels)
	}
	for _, m := range got.ManagedFields {
		if m.Manager == podcontract.FieldOwner {
			t.Errorf("the operator manages fields of the Service: %+v", m)
		}
	}
	if got.ResourceVersion != before.ResourceVersion {
		t.Errorf("resourceVersion %s, want %s: the Service was written", got.ResourceVersion, before.ResourceVersion)
	}
}

// TestDurableObjectNamespaceDoesNotAdoptForeignService: the shard set's Service
// "<name>-do" exists already (here: another Worker's http Service of that name); the
// DurableObjectNamespace leaves it alone and reports ChildConflict naming it.
func TestDurableObjectNamespaceDoesNotAdoptForeignService(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	svc := handMadeService(ns, "rooms-do")
	if err := k8sClient.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	before := svc.DeepCopy()
	if err := k8sClient.Create(ctx, counterWorker(ns, "counter", "rooms")); err != nil {
		t.Fatal(err)
	}
	d := donsFixture(ns, "rooms", "counter", 1, nil)
	if err := k8sClient.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(d)
	eventually(t, "Ready=False ChildConflict", func() error {
		r := meta.FindStatusCondition(getDONS(t, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		if r == nil || r.Reason != fleetv1alpha1.ReasonChildConflict || !strings.Contains(r.Message, `Service "rooms-do"`) {
			return fmt.Errorf("Ready %+v, want reason %s naming the Service", r, fleetv1alpha1.ReasonChildConflict)
		}
		return nil
	})
	assertServiceUntouched(t, before)
}

// TestChangedChildrenAreAppliedAgain: the reconciler skips a child it applied when the
// live object is still the one its apply answered with (common.ApplyAll); a change by
// anyone else to a field the operator sets (a Deployment's container image, a Service's
// label) makes it apply that child again and restore the field.
func TestChangedChildrenAreAppliedAgain(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := workerFixture(ns, "drift")
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	var image string
	eventually(t, "the Deployment", func() error {
		d, err := getDeployment(key)
		if err == nil {
			image = d.Spec.Template.Spec.Containers[0].Image
		}
		return err
	})
	d, _ := getDeployment(key)
	d.Spec.Template.Spec.Containers[0].Image = "example.com/not-workerd:1"
	if err := k8sClient.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment's image restored", func() error {
		d, err := getDeployment(key)
		if err == nil && d.Spec.Template.Spec.Containers[0].Image != image {
			err = fmt.Errorf("image %q, want %q", d.Spec.Template.Spec.Containers[0].Image, image)
		}
		return err
	})
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, key, svc); err != nil {
		t.Fatal(err)
	}
	want := svc.Labels[podcontract.LabelInstance]
	delete(svc.Labels, podcontract.LabelInstance)
	if err := k8sClient.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service's label restored", func() error {
		if err := k8sClient.Get(ctx, key, svc); err != nil {
			return err
		}
		if got := svc.Labels[podcontract.LabelInstance]; got != want || want == "" {
			return fmt.Errorf("label %s=%q, want %q", podcontract.LabelInstance, got, want)
		}
		return nil
	})
}
