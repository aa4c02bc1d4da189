package webhook

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden patches in testdata/patches")

// staticWebhooks returns webhooks for handler tests of kinds whose defaulting needs
// no lookups (Worker, CronSchedule).
func staticWebhooks() *Webhooks { return &Webhooks{opts: Options{}.withDefaults()} }

// TestAddOnlyPatchGolden sends raw objects through the add-only defaulting handler and
// compares the JSON patch with testdata/patches/<case>.json (go test -run
// TestAddOnlyPatchGolden -update rewrites them). Every operation must be "add"; the
// Worker carrying a field unknown to the Go types must get no "remove"; quantities the
// user wrote must not be touched.
func TestAddOnlyPatchGolden(t *testing.T) {
	scheme := testenv.Scheme()
	w := staticWebhooks()
	cases := []struct {
		name    string
		handler admission.Handler
		raw     string
	}{
		{"worker-minimal", AddOnlyDefaulter[*v1alpha1.Worker](scheme, w.WorkerDefaulter()),
			`{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"Worker","metadata":{"name":"a","namespace":"default"},"spec":{"compatibilityDate":"2026-11-01","source":{"inline":{"modules":[{"name":"w.js","type":"ESModule","content":"export default {}"}]}}}}`},
		{"worker-unknown-field-and-quantities", AddOnlyDefaulter[*v1alpha1.Worker](scheme, w.WorkerDefaulter()),
			`{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"Worker","metadata":{"name":"a","namespace":"default"},"spec":{"futureField":{"x":1},"compatibilityDate":"2026-11-01","source":{"inline":{"modules":[{"name":"w.js","type":"ESModule","content":"export default {}"}]}},"pod":{"resources":{"limits":{"cpu":"1000m","memory":"134217728"},"requests":{"cpu":"0.5"}}}}}`},
		{"worker-free-profile-keeps-user-values", AddOnlyDefaulter[*v1alpha1.Worker](scheme, w.WorkerDefaulter()),
			`{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"Worker","metadata":{"name":"a","namespace":"default"},"spec":{"compatibilityDate":"2026-11-01","replicas":0,"limits":{"profile":"free","cpuMs":5},"source":{"inline":{"modules":[{"name":"w.js","type":"ESModule","content":"export default {}"}]}}}}`},
		{"worker-fully-set-no-patch", AddOnlyDefaulter[*v1alpha1.Worker](scheme, w.WorkerDefaulter()),
			`{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"Worker","metadata":{"name":"a","namespace":"default"},"spec":{"compatibilityDate":"2026-11-01","replicas":3,"limits":{"profile":"paid","cpuMs":50,"subrequests":7,"memoryMiB":64},"source":{"inline":{"modules":[{"name":"w.js","type":"ESModule","content":"export default {}"}]}}}}`},
		// A Shared user Worker has no pods: no spec.replicas, no spec.limits.memoryMiB.
		{"worker-shared-user-worker", AddOnlyDefaulter[*v1alpha1.Worker](scheme, w.WorkerDefaulter()),
			`{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"Worker","metadata":{"name":"a","namespace":"default"},"spec":{"compatibilityDate":"2026-11-01","dispatchNamespace":"customers","dispatchPlacement":"Shared","source":{"inline":{"modules":[{"name":"w.js","type":"ESModule","content":"export default {}"}]}}}}`},
		{"cronschedule-minimal", AddOnlyDefaulter[*v1alpha1.CronSchedule](scheme, w.CronScheduleDefaulter()),
			`{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"CronSchedule","metadata":{"name":"c","namespace":"default"},"spec":{"schedules":["*/5 * * * *"],"target":{"workflowRef":{"name":"wf"},"params":{"big":12345678901234567890,"q":"1000m"}}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := c.handler.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create,
				Object:    runtime.RawExtension{Raw: []byte(c.raw)},
			}})
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			for _, op := range resp.Patches {
				if op.Operation != "add" {
					t.Errorf("operation %s %s: only add is allowed", op.Operation, op.Path)
				}
				if strings.HasPrefix(op.Path, "/spec/futureField") || strings.HasPrefix(op.Path, "/spec/pod") || strings.HasPrefix(op.Path, "/spec/target/params") {
					t.Errorf("operation %s %s touches a field the user wrote", op.Operation, op.Path)
				}
			}
			got, err := json.MarshalIndent(resp.Patches, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "patches", c.name+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("patch differs from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// TestStockDefaulterRewritesQuantities documents why SetupWebhooks does not use
// controller-runtime's WithDefaulter: its patch, computed against a Go round-trip,
// rewrites the user's "1000m" (a replace operation).
func TestStockDefaulterRewritesQuantities(t *testing.T) {
	raw := `{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"Worker","metadata":{"name":"a","namespace":"default"},"spec":{"compatibilityDate":"2026-11-01","source":{"inline":{"modules":[{"name":"w.js","type":"ESModule","content":"x"}]}},"pod":{"resources":{"limits":{"cpu":"1000m"}}}}}`
	wh := admission.WithDefaulter[*v1alpha1.Worker](testenv.Scheme(), staticWebhooks().WorkerDefaulter())
	resp := wh.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)}}})
	replaced := false
	for _, op := range resp.Patches {
		if op.Operation == "replace" && op.Path == "/spec/pod/resources/limits/cpu" {
			replaced = true
		}
	}
	if !replaced {
		t.Skipf("controller-runtime no longer rewrites quantities (patches %v); the add-only handler is still correct", resp.Patches)
	}
}

func TestAddOnlyPatchRejectsReplace(t *testing.T) {
	if _, err := AddOnlyPatch([]byte(`{"a":1}`), []byte(`{"a":2}`)); err == nil {
		t.Fatal("a replace operation was accepted")
	}
	if _, err := AddOnlyPatch([]byte(`{"a":1}`), []byte(`{}`)); err == nil {
		t.Fatal("a remove operation was accepted")
	}
	ops, err := AddOnlyPatch([]byte(`{"a":1}`), []byte(`{"a":1,"b":{"c":2}}`))
	if err != nil || len(ops) != 1 || ops[0].Operation != "add" || ops[0].Path != "/b" {
		t.Fatalf("ops %v, err %v; want one add of /b", ops, err)
	}
}
