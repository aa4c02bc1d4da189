package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOddShapes submits objects the Go types cannot hold — spec absent, null or not an
// object, a field of the wrong JSON type, a number beyond its Go integer type — through
// the API server. The mutating webhooks run before the API server's schema validation,
// so they see these objects first; they must leave them to that validation, whose
// error names the field and the schema rule, instead of answering with a Go decoding
// error or a patch the API server cannot apply (HTTP 500 "add operation does not apply").
func TestOddShapes(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	src := `"source":{"inline":{"modules":[{"name":"w.js","type":"ESModule","content":"export default {}"}]}}`
	obj := func(kind, name, spec string) string {
		return `{"apiVersion":"fleet.workerd-operator.io/v1alpha1","kind":"` + kind + `","metadata":{"name":"` + name + `","namespace":"wh"}` + spec + `}`
	}
	worker := func(name, spec string) string { return obj("Worker", name, spec) }
	for _, c := range []struct {
		name    string
		obj     string
		wantErr []string // substrings; nil = admitted
		// stored: for admitted objects, spec paths (dot-separated) and the value they read back as.
		stored map[string]string
	}{
		{"worker-spec-absent", worker("shape-nospec", ``), []string{"spec: Required value"}, nil},
		{"worker-spec-null", worker("shape-nullspec", `,"spec":null`), []string{"spec: Required value"}, nil},
		{"worker-spec-string", worker("shape-strspec", `,"spec":"x"`), []string{"spec: Invalid value: \"string\": spec in body must be of type object"}, nil},
		{"workflow-spec-absent", obj("Workflow", "shape-wf-nospec", ``), []string{"spec: Required value"}, nil},
		{"don-spec-absent", obj("DurableObjectNamespace", "shape-don-nospec", ``), []string{"spec: Required value"}, nil},
		{"cron-spec-absent", obj("CronSchedule", "shape-cron-nospec", ``), []string{"spec: Required value"}, nil},
		{"worker-limits-string", worker("shape-limits-str", `,"spec":{"compatibilityDate":"2026-11-01",`+src+`,"limits":"abc"}`),
			[]string{"spec.limits: Invalid value: \"string\"", "must be of type object"}, nil},
		{"worker-cpums-string", worker("shape-cpu-str", `,"spec":{"compatibilityDate":"2026-11-01",`+src+`,"limits":{"cpuMs":"abc"}}`),
			[]string{"spec.limits.cpuMs: Invalid value: \"string\"", "must be of type integer"}, nil},
		{"worker-cpums-fraction", worker("shape-cpu-frac", `,"spec":{"compatibilityDate":"2026-11-01",`+src+`,"limits":{"cpuMs":10.5}}`),
			[]string{"spec.limits.cpuMs: Invalid value: \"float64\"", "must be of type int64"}, nil},
		{"worker-memory-beyond-int32", worker("shape-mem-big", `,"spec":{"compatibilityDate":"2026-11-01",`+src+`,"limits":{"memoryMiB":30000000000}}`),
			[]string{"spec.limits.memoryMiB: Invalid value: 30000000000", "4096"}, nil},
		{"workflow-steps-string", obj("Workflow", "shape-wf-steps", `,"spec":{"workerRef":{"name":"x"},"className":"F","limits":{"steps":"many"}}`),
			[]string{"spec.limits.steps: Invalid value: \"string\"", "must be of type integer"}, nil},
		{"cron-history-string", obj("CronSchedule", "shape-cron-hist", `,"spec":{"schedules":["* * * * *"],"target":{"workerRef":{"name":"x"}},"historyLimit":"ten"}`),
			[]string{"spec.historyLimit: Invalid value: \"string\"", "must be of type integer"}, nil},
		// wrangler refuses run_worker_first: [] ("must provide at least 1 rule"):
		// https://developers.cloudflare.com/workers/static-assets/binding/#run_worker_first
		{"worker-run-worker-first-empty", worker("shape-rwf-empty", `,"spec":{"compatibilityDate":"2026-11-01",`+src+`,"assets":{"image":"r.example/s:1","runWorkerFirst":[]}}`),
			[]string{"spec.assets.runWorkerFirst", "should have at least 1 items"}, nil},
		// Every list an author writes is bounded in the schema, so admission's cost is.
		{"worker-tolerations-65", worker("shape-tol-65", `,"spec":{"compatibilityDate":"2026-11-01",`+src+`,"pod":{"tolerations":[`+
			strings.TrimSuffix(strings.Repeat(`{"key":"k","operator":"Exists"},`, 65), ",")+`]}}`),
			[]string{"spec.pod.tolerations: Too many: 65: must have at most 64 items"}, nil},
		{"worker-quantities-as-numbers", worker("shape-qnum", `,"spec":{"compatibilityDate":"2026-11-01",`+src+`,"pod":{"resources":{"limits":{"cpu":"0.5","memory":134217728}}}}`),
			nil, map[string]string{"pod.resources.limits.cpu": "0.5", "pod.resources.limits.memory": "134217728", "replicas": "1"}},
		{"worker-quantity-fraction-number", worker("shape-qfrac", `,"spec":{"compatibilityDate":"2026-11-01",`+src+`,"pod":{"resources":{"limits":{"cpu":0.5}}}}`),
			[]string{"spec.pod.resources.limits.cpu: Invalid value: \"number\"", "must be of type integer,string"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal([]byte(c.obj), &u.Object); err != nil {
				t.Fatal(err)
			}
			err := s.c.Create(ctx, u)
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(u.GroupVersionKind())
				if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
					t.Fatal(err)
				}
				for path, want := range c.stored {
					v, found, err := unstructured.NestedFieldNoCopy(got.Object, append([]string{"spec"}, strings.Split(path, ".")...)...)
					b, _ := json.Marshal(v)
					if err != nil || !found || strings.Trim(string(b), `"`) != want {
						t.Errorf("spec.%s = %s (found %v, err %v), want %s", path, b, found, err, want)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted; want an error with %q", c.wantErr)
			}
			for _, want := range c.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
			for _, bad := range []string{"Internal error", "json: cannot unmarshal", "denied the request: quantities"} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("error is the webhook's, not the schema's (%q):\n%v", bad, err)
				}
			}
		})
	}
}
