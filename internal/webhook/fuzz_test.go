package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// FuzzValidate feeds arbitrary JSON specs of the four kinds (kind%4 picks the kind)
// through the lookup-free validation and the defaulters. Invariants: nothing panics;
// defaulting yields only "add" operations and leaves a valid object valid; every
// rejection that cites a limit also names its source. The seed corpus is in
// testdata/fuzz/FuzzValidate.
func FuzzValidate(f *testing.F) {
	f.Add(uint8(0), []byte(`{"compatibilityDate":"2026-11-17","limits":{"profile":"free","cpuMs":11},"source":{"inline":{"modules":[{"name":"a.js","type":"ESModule","content":"x"}]}}}`))
	f.Add(uint8(1), []byte(`{"workerRef":{"name":"w"},"className":"C","limits":{"steps":1025},"defaults":{"timeout":"0","retries":{"delay":"0","limit":10000,"backoff":"linear"}},"schedules":["0 0 30 2 *"]}`))
	f.Add(uint8(2), []byte(`{"workerRef":{"name":"w"},"className":"C","shards":2,"channels":{"enabled":true,"maxChannels":65}}`))
	f.Add(uint8(3), []byte(`{"schedules":["*/5 * * * *","0 0 L * *"],"timeZone":"Europe/Paris","target":{"workflowRef":{"name":"x"},"params":{"a":1}}}`))
	w := staticWebhooks()
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		for _, p := range limits.Profiles {
			c := &check{t: w.opts.Limits, p: p}
			spec := field.NewPath("spec")
			var before, after []byte
			switch kind % 4 {
			case 0:
				var s v1alpha1.WorkerSpec
				if json.Unmarshal(data, &s) != nil {
					return
				}
				validateWorkerSpec(c, spec, &s, w.opts.WorkerdVersion, ScriptSizeRules2024)
				validateWorkerSpec(c, spec, &s, w.opts.WorkerdVersion, ScriptSizeRules2026)
				wk := &v1alpha1.Worker{Spec: s}
				before, _ = json.Marshal(wk)
				_ = w.WorkerDefaulter().Default(t.Context(), wk)
				after, _ = json.Marshal(wk)
			case 1:
				var s v1alpha1.WorkflowSpec
				if json.Unmarshal(data, &s) != nil {
					return
				}
				validateWorkflowSpec(c, spec, &s)
			case 2:
				var s v1alpha1.DurableObjectNamespaceSpec
				if json.Unmarshal(data, &s) != nil {
					return
				}
				o := &v1alpha1.DurableObjectNamespace{Spec: s}
				validateDONSpec(c, spec, o.DeepCopy(), o)
				old := o.DeepCopy()
				old.Spec.Shards = nil
				validateDONSpec(c, spec, old, o)
			case 3:
				var s v1alpha1.CronScheduleSpec
				if json.Unmarshal(data, &s) != nil {
					return
				}
				validateCronScheduleSpec(c, spec, &s)
				cs := &v1alpha1.CronSchedule{Spec: s}
				before, _ = json.Marshal(cs)
				_ = w.CronScheduleDefaulter().Default(t.Context(), cs)
				after, _ = json.Marshal(cs)
			}
			if before != nil {
				if _, err := AddOnlyPatch(before, after); err != nil {
					t.Fatalf("defaulting is not add-only: %v", err)
				}
			}
			for _, e := range c.errs {
				if strings.Contains(e.Detail, "limit ") && strings.Contains(e.Detail, "profile") && !strings.Contains(e.Detail, "source: ") {
					t.Fatalf("rejection cites a limit without its source: %v", e)
				}
			}
		}
	})
}
