package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// FuzzDefaultHandler feeds arbitrary JSON as the spec of a Worker or CronSchedule
// (kind%2; the defaulters that read nothing) through the add-only defaulting handler,
// as the API server sends it before schema validation. Invariants: no panic, no HTTP
// 500, and every patch applies to the object as sent (each operation an "add" whose
// parent is a JSON object there): the API server answers a patch that does not apply
// with an internal error. The seed corpus is in testdata/fuzz/FuzzDefaultHandler.
func FuzzDefaultHandler(f *testing.F) {
	for _, s := range []string{
		`{"compatibilityDate":"2026-11-01","source":{"inline":{"modules":[{"name":"w.js","type":"ESModule","content":"x"}]}}}`,
		`null`, `"x"`, `{}`, `{"limits":{}}`, `{"limits":null}`, `{"limits":"x"}`, `{"limits":{"cpuMs":"abc"}}`,
		`{"limits":{"memoryMiB":30000000000}}`, `{"pod":{"resources":{"limits":{"cpu":0.5}}}}`, `[]`, `{"replicas":null}`,
	} {
		f.Add(uint8(0), []byte(s))
	}
	f.Add(uint8(1), []byte(`{"schedules":["* * * * *"],"target":{"workerRef":{"name":"w"}},"concurrencyPolicy":""}`))
	f.Add(uint8(1), []byte(`{"target":null,"historyLimit":"x"}`))
	scheme := testenv.Scheme()
	w := staticWebhooks()
	handlers := []struct {
		kind string
		h    admission.Handler
	}{
		{"Worker", AddOnlyDefaulter[*v1alpha1.Worker](scheme, w.WorkerDefaulter())},
		{"CronSchedule", AddOnlyDefaulter[*v1alpha1.CronSchedule](scheme, w.CronScheduleDefaulter())},
	}
	f.Fuzz(func(t *testing.T, kind uint8, spec []byte) {
		if !json.Valid(spec) {
			return
		}
		hk := handlers[int(kind)%len(handlers)]
		raw := `{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"` + hk.kind + `","metadata":{"name":"a","namespace":"default"},"spec":` + string(spec) + `}`
		resp := hk.h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)},
		}})
		if resp.Result != nil && resp.Result.Code == http.StatusInternalServerError {
			t.Fatalf("HTTP 500 for %s: %s", raw, resp.Result.Message)
		}
		if !resp.Allowed || len(resp.Patches) == 0 {
			return
		}
		var doc any
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			t.Fatal(err)
		}
		for _, op := range resp.Patches {
			if op.Operation != "add" {
				t.Fatalf("%s %s for %s: only add is allowed", op.Operation, op.Path, raw)
			}
			parts := strings.Split(op.Path, "/")[1:]
			parent := doc
			for _, p := range parts[:len(parts)-1] {
				m, ok := parent.(map[string]any)
				if !ok {
					t.Fatalf("add %s does not apply to %s: %q is not in an object", op.Path, raw, p)
				}
				if parent, ok = m[p]; !ok {
					t.Fatalf("add %s does not apply to %s: no %q", op.Path, raw, p)
				}
			}
			m, ok := parent.(map[string]any)
			if !ok {
				t.Fatalf("add %s does not apply to %s: its parent is not an object", op.Path, raw)
			}
			m[parts[len(parts)-1]] = op.Value
		}
	})
}
