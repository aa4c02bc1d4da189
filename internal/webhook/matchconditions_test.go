package webhook

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// webhookCalls returns how many admission requests this process's webhook server has
// answered on path (controller-runtime's controller_runtime_webhook_requests_total,
// all response codes).
func webhookCalls(t *testing.T, path string) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == path {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// leaves flattens a JSON object into its leaf paths (lists are leaves).
func leaves(prefix []string, v any, out map[string][]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		out[strings.Join(prefix, ".")] = prefix
		return
	}
	for k, c := range m {
		leaves(append(append([]string(nil), prefix...), k), c, out)
	}
}

// TestMatchConditions checks the matchConditions of config/webhook/manifests.yaml
// (the patch= of this package's webhook markers) against the defaulters, per kind,
// through the real API server:
//   - the object the defaulter completes, submitted again, skips the mutating webhook
//     (no call) and is stored exactly as submitted;
//   - the same object without any one field the defaulter writes is sent to the
//     mutating webhook and stored with that field defaulted again — so a default added
//     to a defaulter but not to its matchCondition fails here;
//   - an update that leaves spec unchanged skips both webhooks; one that changes spec
//     is validated.
func TestMatchConditions(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	// The Worker whose profile the Workflow, DurableObjectNamespace and CronSchedule run under.
	if err := s.c.Create(ctx, newWorker("mc-"+profileWorker(limits.Paid), limits.Paid, nil)); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	ref := v1alpha1.LocalObjectReference{Name: "mc-" + profileWorker(limits.Paid)}
	minimal := func(w *v1alpha1.Worker) *v1alpha1.Worker { w.Spec.Limits = nil; return w }
	cases := []struct {
		kind       string
		obj        client.Object // needs every default its defaulter writes
		mutatePath string
		validPath  string
		specChange func(*unstructured.Unstructured)
	}{
		{"Worker", minimal(newWorker("mc-worker", limits.Paid, nil)), MutateWorkerPath, ValidateWorkerPath,
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas")
			}},
		// A Shared user Worker has no replicas nor memoryMiB (it has no pods), so their
		// absence calls nothing once the other defaults are there.
		{"SharedUserWorker", minimal(newSharedWorker("mc-shared", nil)), MutateWorkerPath, ValidateWorkerPath,
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "2026-11-02", "spec", "compatibilityDate")
			}},
		{"Workflow", newWorkflow("mc-workflow", limits.Paid, func(s *v1alpha1.WorkflowSpec) { s.WorkerRef = ref }), MutateWorkflowPath, ValidateWorkflowPath,
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "2 minutes", "spec", "defaults", "timeout")
			}},
		{"DurableObjectNamespace", newDON("mc-don", limits.Paid, func(s *v1alpha1.DurableObjectNamespaceSpec) {
			s.WorkerRef = ref
			s.Channels = &v1alpha1.ChannelsSpec{Enabled: true}
		}), MutateDurableObjectNamespacePath, ValidateDurableObjectNamespacePath,
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, true, "spec", "preventEviction")
			}},
		{"CronSchedule", newCron("mc-cron", func(s *v1alpha1.CronScheduleSpec) { s.Target.WorkerRef = &ref }), MutateCronSchedulePath, ValidateCronSchedulePath,
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "historyLimit")
			}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			submitted, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.obj)
			if err != nil {
				t.Fatal(err)
			}
			gvk, err := s.c.GroupVersionKindFor(c.obj)
			if err != nil {
				t.Fatal(err)
			}
			get := func(name string) *unstructured.Unstructured {
				t.Helper()
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(gvk)
				if err := s.c.Get(ctx, client.ObjectKey{Namespace: testNS, Name: name}, u); err != nil {
					t.Fatal(err)
				}
				return u
			}
			create := func(name string, spec map[string]any) *unstructured.Unstructured {
				t.Helper()
				u := &unstructured.Unstructured{Object: map[string]any{"spec": runtime.DeepCopyJSONValue(spec)}}
				u.SetGroupVersionKind(gvk)
				u.SetNamespace(testNS)
				u.SetName(name)
				if err := s.c.Create(ctx, u); err != nil {
					t.Fatalf("create %s: %v", name, err)
				}
				return get(name)
			}

			// The defaulter completes the minimal object.
			m0 := webhookCalls(t, c.mutatePath)
			first := create(c.obj.GetName(), submitted["spec"].(map[string]any))
			if got := webhookCalls(t, c.mutatePath) - m0; got != 1 {
				t.Fatalf("minimal object: %v mutating calls, want 1", got)
			}
			full := first.Object["spec"].(map[string]any)
			before, after := map[string][]string{}, map[string][]string{}
			leaves(nil, submitted["spec"], before)
			leaves(nil, full, after)
			var defaulted []string
			for k := range after {
				if _, ok := before[k]; !ok {
					defaulted = append(defaulted, k)
				}
			}
			sort.Strings(defaulted)
			if len(defaulted) == 0 {
				t.Fatalf("the defaulter added nothing to %v", submitted["spec"])
			}

			// Complete: no mutating call, stored as submitted.
			m0 = webhookCalls(t, c.mutatePath)
			got := create(c.obj.GetName()+"-full", full)
			if n := webhookCalls(t, c.mutatePath) - m0; n != 0 {
				t.Errorf("complete object: %v mutating calls, want 0", n)
			}
			if !reflect.DeepEqual(got.Object["spec"], full) {
				t.Errorf("complete object stored as %v, submitted %v", got.Object["spec"], full)
			}

			// Each default missing: the webhook is called and writes it again.
			for i, leaf := range defaulted {
				path := after[leaf]
				spec := runtime.DeepCopyJSONValue(full).(map[string]any)
				unstructured.RemoveNestedField(spec, path...)
				want, _, _ := unstructured.NestedFieldNoCopy(full, path...)
				m0 = webhookCalls(t, c.mutatePath)
				got := create(fmt.Sprintf("%s-missing-%d", c.obj.GetName(), i), spec)
				if n := webhookCalls(t, c.mutatePath) - m0; n != 1 {
					t.Errorf("spec.%s missing: %v mutating calls, want 1", leaf, n)
				}
				if v, found, _ := unstructured.NestedFieldNoCopy(got.Object, append([]string{"spec"}, path...)...); !found || !reflect.DeepEqual(v, want) {
					t.Errorf("spec.%s missing: stored %v (found %v), want the default %v", leaf, v, found, want)
				}
			}

			// Updates: metadata only skips both webhooks; a spec change is validated.
			u := get(c.obj.GetName() + "-full")
			m0, v0 := webhookCalls(t, c.mutatePath), webhookCalls(t, c.validPath)
			u.SetLabels(map[string]string{"touched": "yes"})
			if err := s.c.Update(ctx, u); err != nil {
				t.Fatalf("metadata update: %v", err)
			}
			if m, v := webhookCalls(t, c.mutatePath)-m0, webhookCalls(t, c.validPath)-v0; m != 0 || v != 0 {
				t.Errorf("metadata-only update: %v mutating and %v validating calls, want 0 and 0", m, v)
			}
			c.specChange(u)
			if err := s.c.Update(ctx, u); err != nil {
				t.Fatalf("spec update: %v", err)
			}
			if m, v := webhookCalls(t, c.mutatePath)-m0, webhookCalls(t, c.validPath)-v0; m != 0 || v != 1 {
				t.Errorf("spec update of a complete object: %v mutating and %v validating calls, want 0 and 1", m, v)
			}
		})
	}
}
