package webhook

import (
	"context"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	whaccessors "k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// BenchmarkMatchConditions measures what the Worker webhooks' matchConditions
// (config/webhook/manifests.yaml) cost the API server per create that still calls
// both webhooks (BenchmarkAdmissionRoundTrip's Worker: no spec.limits), compiled and
// evaluated by kube-apiserver's own matcher (k8s.io/apiserver
// admission/plugin/webhook/matchconditions, via the webhook accessors), with a fresh
// lazily converted object per evaluation as each request has. Compare with the
// ~1 ms a webhook call costs (docs/benchmarks.md).
// Run: go test ./internal/webhook -run '^$' -bench MatchConditions
func BenchmarkMatchConditions(b *testing.B) {
	root, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	mw, vw, err := loadWebhookConfigs(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	w := newWorker("b0-1", limits.Paid, nil)
	w.Spec.Limits = nil
	w.Namespace = "bench-webhook"
	w.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "webhook.test", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "fleet.workerd-operator.io/v1alpha1", FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{".":{},"f:compatibilityDate":{},"f:source":{".":{},"f:inline":{".":{},"f:modules":{}}}}}`)}}}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
	if err != nil {
		b.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: content}
	gvk := schema.GroupVersionKind{Group: "fleet.workerd-operator.io", Version: "v1alpha1", Kind: "Worker"}
	obj.SetGroupVersionKind(gvk)
	gvr := gvk.GroupVersion().WithResource("workers")
	attr := admission.NewAttributesRecord(obj, nil, gvk, w.Namespace, w.Name, gvr, "", admission.Create,
		&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "admin"})
	compiler := cel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	var hooks []whaccessors.WebhookAccessor
	for i := range mw[0].Webhooks {
		if h := &mw[0].Webhooks[i]; h.Name == webhookNames[MutateWorkerPath] {
			hooks = append(hooks, whaccessors.NewMutatingWebhookAccessor(h.Name, mw[0].Name, h))
		}
	}
	for i := range vw[0].Webhooks {
		if h := &vw[0].Webhooks[i]; h.Name == webhookNames[ValidateWorkerPath] {
			hooks = append(hooks, whaccessors.NewValidatingWebhookAccessor(h.Name, vw[0].Name, h))
		}
	}
	if len(hooks) != 2 {
		b.Fatalf("found %d Worker webhooks in manifests.yaml, want 2", len(hooks))
	}
	for _, h := range hooks {
		if len(h.GetMatchConditions()) == 0 {
			b.Fatalf("%s has no matchConditions", h.GetName())
		}
		m := h.GetCompiledMatcher(compiler)
		b.Run(h.GetName(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				va := &admission.VersionedAttributes{Attributes: attr, VersionedObject: admission.NewLazyObject(obj), VersionedKind: gvk}
				if r := m.Match(context.Background(), va, nil, nil); !r.Matches || r.Error != nil {
					b.Fatalf("match = %+v; the bench's Worker must call the webhook", r)
				}
			}
		})
	}
}
