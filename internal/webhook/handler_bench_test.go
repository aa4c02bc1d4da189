package webhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// benchReview is an AdmissionReview as kube-apiserver sends it for the create that
// BenchmarkAdmissionRoundTrip makes: a Worker with one inline module and no
// spec.limits, carrying the metadata the API server sets before admission (uid,
// creationTimestamp, generation, managedFields).
const benchReview = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"0f3b3c8e-7d0a-4a53-9a52-3f0c1b2a4d5e","kind":{"group":"fleet.workerd-operator.io","version":"v1alpha1","kind":"Worker"},"resource":{"group":"fleet.workerd-operator.io","version":"v1alpha1","resource":"workers"},"requestKind":{"group":"fleet.workerd-operator.io","version":"v1alpha1","kind":"Worker"},"requestResource":{"group":"fleet.workerd-operator.io","version":"v1alpha1","resource":"workers"},"name":"b0-17","namespace":"bench-webhook","operation":"CREATE","userInfo":{"username":"admin","groups":["system:masters","system:authenticated"]},"object":{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"Worker","metadata":{"creationTimestamp":"2026-11-30T21:45:23Z","generation":1,"managedFields":[{"apiVersion":"fleet.workerd-operator.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:compatibilityDate":{},"f:source":{".":{},"f:inline":{".":{},"f:modules":{}}}}},"manager":"webhook.test","operation":"Update","time":"2026-11-30T21:45:23Z"}],"name":"b0-17","namespace":"bench-webhook","uid":"5b1f2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b"},"spec":{"compatibilityDate":"2026-11-01","source":{"inline":{"modules":[{"content":"export default {}","name":"worker.js","type":"ESModule"}]}}}},"oldObject":null,"dryRun":false,"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}}}`

// BenchmarkWebhookServeHTTP measures the webhook server's side of one admission call
// without the network: controller-runtime's admission.Webhook.ServeHTTP (read and decode
// the AdmissionReview, the handler, encode the response) for the Worker defaulter
// (add-only patch), the Worker validator, and a handler that only allows (the floor
// every call pays). Run: go test ./internal/webhook -run '^$' -bench WebhookServeHTTP
func BenchmarkWebhookServeHTTP(b *testing.B) {
	scheme := testenv.Scheme()
	w := staticWebhooks()
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"mutate-worker", &admission.Webhook{Handler: AddOnlyDefaulter[*v1alpha1.Worker](scheme, w.WorkerDefaulter())}},
		{"validate-worker", admission.WithValidator[*v1alpha1.Worker](scheme, w.WorkerValidator())},
		{"allow-only", &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		})}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(benchReview)))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				c.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":true`)) {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
