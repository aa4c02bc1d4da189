package v1alpha1_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

func TestBindingHelpers(t *testing.T) {
	s := func(v string) *string { return &v }
	yes := true
	ref := func(n string) *v1alpha1.LocalObjectReference { return &v1alpha1.LocalObjectReference{Name: n} }
	secret := func(n string, optional *bool) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: n}, Key: "k", Optional: optional}
	}
	cases := []struct {
		b                v1alpha1.Binding
		kind             v1alpha1.BindingKind
		refKind, refName string
		envVar, optional bool
		value            string
	}{
		{b: v1alpha1.Binding{Text: s("hi")}, kind: v1alpha1.BindingText, envVar: true, value: "hi"},
		{b: v1alpha1.Binding{JSON: s("{}")}, kind: v1alpha1.BindingJSON, envVar: true, value: "{}"},
		{b: v1alpha1.Binding{SecretKeyRef: secret("tok", nil)}, kind: v1alpha1.BindingSecretKeyRef, refKind: v1alpha1.ReferenceSecret, refName: "tok", envVar: true},
		{b: v1alpha1.Binding{SecretKeyRef: secret("tok", &yes)}, kind: v1alpha1.BindingSecretKeyRef, refKind: v1alpha1.ReferenceSecret, refName: "tok", envVar: true, optional: true},
		{b: v1alpha1.Binding{Service: &v1alpha1.ServiceBinding{Name: "api"}}, kind: v1alpha1.BindingService, refKind: v1alpha1.ReferenceWorker, refName: "api"},
		{b: v1alpha1.Binding{DurableObjectNamespace: ref("rooms")}, kind: v1alpha1.BindingDurableObjectNamespace, refKind: v1alpha1.ReferenceDurableObjectNamespace, refName: "rooms"},
		{b: v1alpha1.Binding{Workflow: ref("flow")}, kind: v1alpha1.BindingWorkflow, refKind: v1alpha1.ReferenceWorkflow, refName: "flow"},
		{b: v1alpha1.Binding{Hyperdrive: &v1alpha1.HyperdriveBinding{SecretRef: v1alpha1.LocalObjectReference{Name: "pg"}}}, kind: v1alpha1.BindingHyperdrive, refKind: v1alpha1.ReferenceSecret, refName: "pg"},
		{b: v1alpha1.Binding{}},
		{b: v1alpha1.Binding{Text: s("a"), Workflow: ref("flow")}},
		{b: v1alpha1.Binding{KVNamespace: ref("cache")}, kind: v1alpha1.BindingKVNamespace, refKind: v1alpha1.ReferenceKVNamespace, refName: "cache"},
		{b: v1alpha1.Binding{D1Database: ref("db")}, kind: v1alpha1.BindingD1Database, refKind: v1alpha1.ReferenceD1Database, refName: "db"},
		{b: v1alpha1.Binding{Queue: &v1alpha1.QueueBinding{Name: "jobs"}}, kind: v1alpha1.BindingQueue, refKind: v1alpha1.ReferenceQueue, refName: "jobs"},
	}
	for _, tc := range cases {
		if got := tc.b.Kind(); got != tc.kind {
			t.Errorf("%+v: Kind = %q, want %q", tc.b, got, tc.kind)
		}
		if k, n := tc.b.Reference(); k != tc.refKind || n != tc.refName {
			t.Errorf("%+v: Reference = %q %q, want %q %q", tc.b, k, n, tc.refKind, tc.refName)
		}
		if tc.b.IsEnvVar() != tc.envVar || tc.b.Optional() != tc.optional {
			t.Errorf("%+v: IsEnvVar %v Optional %v", tc.b, tc.b.IsEnvVar(), tc.b.Optional())
		}
		if v, ok := tc.b.Value(); v != tc.value || ok != (tc.value != "") {
			t.Errorf("%+v: Value = %q %v", tc.b, v, ok)
		}
	}
	if a, b := cases[6].b.ReferenceField(), cases[7].b.ReferenceField(); a != "workflow.name" || b != "hyperdrive.secretRef.name" {
		t.Errorf("ReferenceField: workflow %q, hyperdrive %q", a, b)
	}
	if got := len(cases[9].b.Kinds()); got != 2 {
		t.Errorf("Kinds of a binding with two fields: %d, want 2", got)
	}
	w := &v1alpha1.Worker{Spec: v1alpha1.WorkerSpec{Bindings: []v1alpha1.Binding{
		{Name: "A", Service: &v1alpha1.ServiceBinding{Name: "x"}},
		{Name: "B", SecretKeyRef: secret("tok", &yes)},
		{Name: "C", Service: &v1alpha1.ServiceBinding{Name: "y"}},
	}}}
	if got := w.ReferencedNames(v1alpha1.ReferenceWorker); !reflect.DeepEqual(got, []string{"x", "y"}) {
		t.Errorf("ReferencedNames(Worker) = %v", got)
	}
	if got := w.ReferencedNames(v1alpha1.ReferenceSecret); !reflect.DeepEqual(got, []string{"tok"}) {
		t.Errorf("ReferencedNames(Secret) = %v", got)
	}
	want := []v1alpha1.BindingKind{"text", "json", "secretKeyRef", "service", "durableObjectNamespace", "workflow", "kvNamespace", "d1Database", "queue", "hyperdrive", "r2Bucket", "ai", "dispatchNamespace"}
	if got := v1alpha1.BindingKinds(); !reflect.DeepEqual(got, want) {
		t.Errorf("BindingKinds = %v", got)
	}
}
