package webhook

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// sharedWebhooks is staticWebhooks with a Reader holding the ConfigMap "site-code" of
// testNS, so a configMap source's script size is checked rather than warned about.
func sharedWebhooks() *Webhooks {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "site-code", Namespace: testNS},
		Data: map[string]string{"worker.js": "export default {}"}}
	w := staticWebhooks()
	w.opts.Reader = fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(cm).Build()
	return w
}

// newSharedWorker is newWorker as a Shared user Worker of dispatch namespace
// "customers" with one text and one json binding.
func newSharedWorker(name string, mut func(*v1alpha1.WorkerSpec)) *v1alpha1.Worker {
	return newWorker(name, limits.Paid, func(s *v1alpha1.WorkerSpec) {
		s.DispatchNamespace = "customers"
		s.DispatchPlacement = v1alpha1.DispatchPlacementShared
		s.Bindings = []v1alpha1.Binding{{Name: "GREETING", Text: ptr("hello")}, {Name: "CONFIG", JSON: ptr(`{"a":1}`)}}
		s.Limits.CPUMs, s.Limits.Subrequests = ptr(int64(50)), ptr(int64(100))
		if mut != nil {
			mut(s)
		}
	})
}

// causes returns "field: type" of each cause of a ValidateWorker refusal.
func causes(t *testing.T, err error) []string {
	t.Helper()
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil {
		t.Fatalf("not an Invalid status error: %v", err)
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, c.Field+": "+string(c.Type))
	}
	return out
}

// TestSharedUserWorker: a Shared user Worker is refused, field by field, what an
// isolate loaded by workerLoader cannot have; with inline or configMap modules and
// text and json bindings it is admitted; Dedicated user Workers and other Workers are
// unaffected.
func TestSharedUserWorker(t *testing.T) {
	forbidden := string(field.ErrorTypeForbidden)
	cases := []struct {
		name string
		wk   *v1alpha1.Worker
		want []string // "field: type" of every error; nil = admitted
	}{
		{"inline-text-json", newSharedWorker("site", nil), nil},
		{"configmap", newSharedWorker("site-cm", func(s *v1alpha1.WorkerSpec) {
			s.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "site-code", Main: "worker.js"}}
		}), nil},
		{"image", newSharedWorker("img", func(s *v1alpha1.WorkerSpec) {
			s.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "ghcr.io/acme/site:1", Main: "worker.js"}}
		}), []string{"spec.source.image: " + forbidden}},
		{"assets", newSharedWorker("assets", func(s *v1alpha1.WorkerSpec) {
			s.Assets = &v1alpha1.WorkerAssets{Image: "ghcr.io/acme/site-assets:1"}
		}), []string{"spec.assets: " + forbidden}},
		{"secret-and-kv-bindings", newSharedWorker("bind", func(s *v1alpha1.WorkerSpec) {
			s.Bindings = append(s.Bindings,
				v1alpha1.Binding{Name: "TOKEN", SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "t"}, Key: "k"}},
				v1alpha1.Binding{Name: "CACHE", KVNamespace: &v1alpha1.LocalObjectReference{Name: "cache"}})
		}), []string{"spec.bindings[2]: " + forbidden, "spec.bindings[3]: " + forbidden}},
		{"service-binding", newSharedWorker("svc", func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "API", Service: &v1alpha1.ServiceBinding{Name: "api"}}}
		}), []string{"spec.bindings[0]: " + forbidden}},
		{"replicas", newSharedWorker("replicas", func(s *v1alpha1.WorkerSpec) { s.Replicas = ptr(int32(1)) }), []string{"spec.replicas: " + forbidden}},
		{"runtime", newSharedWorker("runtime", func(s *v1alpha1.WorkerSpec) { s.Runtime = &v1alpha1.RuntimeSpec{Version: PinnedWorkerdVersion} }),
			[]string{"spec.runtime: " + forbidden}},
		{"pod", newSharedWorker("pod", func(s *v1alpha1.WorkerSpec) { s.Pod = &v1alpha1.PodOverrides{} }), []string{"spec.pod: " + forbidden}},
		{"service", newSharedWorker("service", func(s *v1alpha1.WorkerSpec) { s.Service = &v1alpha1.WorkerServiceSpec{} }), []string{"spec.service: " + forbidden}},
		{"deployment", newSharedWorker("deploy", func(s *v1alpha1.WorkerSpec) { s.Deployment = &v1alpha1.WorkerDeployment{} }), []string{"spec.deployment: " + forbidden}},
		{"outbound", newSharedWorker("outbound", func(s *v1alpha1.WorkerSpec) { s.Outbound = &v1alpha1.OutboundSpec{} }), []string{"spec.outbound: " + forbidden}},
		{"tails", newSharedWorker("tails", func(s *v1alpha1.WorkerSpec) { s.Tails = []v1alpha1.TailConsumer{{Service: "logs"}} }), []string{"spec.tails: " + forbidden}},
		{"memory", newSharedWorker("memory", func(s *v1alpha1.WorkerSpec) { s.Limits.MemoryMiB = ptr(int32(64)) }), []string{"spec.limits.memoryMiB: " + forbidden}},
		// Pod-ful fields on a Dedicated user Worker and on an ordinary Worker.
		{"dedicated-user-worker", podful("dedicated", "customers", v1alpha1.DispatchPlacementDedicated), nil},
		{"default-placement-user-worker", podful("default-placement", "customers", ""), nil},
		{"ordinary-worker", podful("ordinary", "", ""), nil},
		// Shared without spec.dispatchNamespace is the CRD's to refuse, not a user Worker.
		{"shared-without-dispatch-namespace", podful("no-dn", "", v1alpha1.DispatchPlacementShared), nil},
	}
	w := sharedWebhooks()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.ValidateWorker(context.Background(), c.wk)
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted; want %v", c.want)
			}
			if got := causes(t, err); !slices.Equal(got, c.want) {
				t.Errorf("errors %v, want %v\n%v", got, c.want, err)
			}
			for _, want := range []string{"Shared", "spec.source.inline or spec.source.configMap, text and json bindings", `"Shared placement" in docs/dispatch.md`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q lacks %q", err, want)
				}
			}
		})
	}
}

// podful is a Worker with every field a Shared user Worker is refused that the zero
// Policy admits.
func podful(name, dispatchNamespace string, placement v1alpha1.DispatchPlacement) *v1alpha1.Worker {
	return newWorker(name, limits.Paid, func(s *v1alpha1.WorkerSpec) {
		s.DispatchNamespace, s.DispatchPlacement = dispatchNamespace, placement
		s.Replicas, s.Limits.MemoryMiB = ptr(int32(2)), ptr(int32(64))
		s.Runtime = &v1alpha1.RuntimeSpec{Version: PinnedWorkerdVersion}
		s.Service = &v1alpha1.WorkerServiceSpec{}
		s.Tails = []v1alpha1.TailConsumer{{Service: "logs"}}
		s.Bindings = []v1alpha1.Binding{{Name: "API", Service: &v1alpha1.ServiceBinding{Name: "api"}},
			{Name: "TOKEN", SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "t"}, Key: "k"}}}
	})
}

// TestSharedUserWorkerMessages: each refusal names the binding or says why the field
// has no place on a Worker without pods of its own.
func TestSharedUserWorkerMessages(t *testing.T) {
	spec := field.NewPath("spec")
	s := &newSharedWorker("msg", func(s *v1alpha1.WorkerSpec) {
		s.Bindings = append(s.Bindings, v1alpha1.Binding{Name: "DB", D1Database: &v1alpha1.LocalObjectReference{Name: "db"}})
		s.Replicas = ptr(int32(1))
	}).Spec
	errs := validateSharedUserWorker(spec, s)
	if len(errs) != 2 {
		t.Fatalf("errors %v, want 2", errs)
	}
	for i, want := range [][]string{
		{"spec.bindings[2]", `binding "DB" is a d1Database binding`},
		{"spec.replicas", "has no pods of its own", "dispatch Workers' pods"},
	} {
		for _, w := range want {
			if !strings.Contains(errs[i].Error(), w) {
				t.Errorf("%q lacks %q", errs[i].Error(), w)
			}
		}
	}
}

// TestSharedUserWorkerDefaults: the defaulter gives a Shared user Worker no
// spec.replicas and no spec.limits.memoryMiB, which its validation refuses, and still
// gives them to a Dedicated one; the defaulted Shared Worker is admitted.
func TestSharedUserWorkerDefaults(t *testing.T) {
	w := sharedWebhooks()
	ctx := context.Background()
	shared := newSharedWorker("dflt-shared", func(s *v1alpha1.WorkerSpec) { s.Limits = nil })
	if err := w.WorkerDefaulter().Default(ctx, shared); err != nil {
		t.Fatal(err)
	}
	if l := shared.Spec.Limits; shared.Spec.Replicas != nil || l == nil || l.MemoryMiB != nil || l.CPUMs == nil || l.Subrequests == nil || l.Profile == "" {
		t.Errorf("Shared defaulted to replicas %v, limits %+v; want no replicas and no memoryMiB, the rest defaulted", shared.Spec.Replicas, l)
	}
	if _, err := w.ValidateWorker(ctx, shared); err != nil {
		t.Errorf("defaulted Shared user Worker refused: %v", err)
	}
	dedicated := newWorker("dflt-dedicated", limits.Paid, func(s *v1alpha1.WorkerSpec) { s.DispatchNamespace, s.Limits = "customers", nil })
	if err := w.WorkerDefaulter().Default(ctx, dedicated); err != nil {
		t.Fatal(err)
	}
	if dedicated.Spec.Replicas == nil || dedicated.Spec.Limits.MemoryMiB == nil {
		t.Errorf("Dedicated defaulted to replicas %v, limits %+v; want both defaulted", dedicated.Spec.Replicas, dedicated.Spec.Limits)
	}
}
