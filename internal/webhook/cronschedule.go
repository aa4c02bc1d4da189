package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones for spec.timeZone even where the image has none

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// Defaults of a CronSchedule (API documentation of CronScheduleSpec).
const (
	DefaultConcurrencyPolicy = v1alpha1.ConcurrencyAllow
	DefaultHistoryLimit      = int32(10)
)

// CronScheduleDefaulter defaults spec.concurrencyPolicy (Allow) and spec.historyLimit (10).
type CronScheduleDefaulter struct{ w *Webhooks }

// CronScheduleValidator validates a CronSchedule.
type CronScheduleValidator struct{ w *Webhooks }

var (
	_ admission.Defaulter[*v1alpha1.CronSchedule] = (*CronScheduleDefaulter)(nil)
	_ admission.Validator[*v1alpha1.CronSchedule] = (*CronScheduleValidator)(nil)
)

// CronScheduleDefaulter returns the CronSchedule defaulter.
func (w *Webhooks) CronScheduleDefaulter() *CronScheduleDefaulter { return &CronScheduleDefaulter{w} }

// CronScheduleValidator returns the CronSchedule validator.
func (w *Webhooks) CronScheduleValidator() *CronScheduleValidator { return &CronScheduleValidator{w} }

// Default implements admission.Defaulter.
func (d *CronScheduleDefaulter) Default(_ context.Context, o *v1alpha1.CronSchedule) error {
	if o.Spec.ConcurrencyPolicy == "" {
		o.Spec.ConcurrencyPolicy = DefaultConcurrencyPolicy
	}
	if o.Spec.HistoryLimit == nil {
		o.Spec.HistoryLimit = ptr(DefaultHistoryLimit)
	}
	return nil
}

// ValidateCreate implements admission.Validator.
func (v *CronScheduleValidator) ValidateCreate(ctx context.Context, o *v1alpha1.CronSchedule) (admission.Warnings, error) {
	return v.w.ValidateCronSchedule(ctx, o)
}

// ValidateUpdate implements admission.Validator.
func (v *CronScheduleValidator) ValidateUpdate(ctx context.Context, _, o *v1alpha1.CronSchedule) (admission.Warnings, error) {
	return v.w.ValidateCronSchedule(ctx, o)
}

// ValidateDelete implements admission.Validator; deletes are always allowed.
func (v *CronScheduleValidator) ValidateDelete(context.Context, *v1alpha1.CronSchedule) (admission.Warnings, error) {
	return nil, nil
}

// ValidateCronSchedule checks the expressions, the time zone, the params and the
// target of a CronSchedule. A Workflow target's profile comes from its Worker; a
// Worker target's from the Worker itself.
func (w *Webhooks) ValidateCronSchedule(ctx context.Context, o *v1alpha1.CronSchedule) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	c := &check{t: w.opts.Limits, p: w.opts.DefaultProfile}
	tp := spec.Child("target")
	switch {
	case o.Spec.Target.WorkerRef != nil:
		c.p = w.profileFromWorker(ctx, c, tp.Child("workerRef", "name"), o.Namespace, o.Spec.Target.WorkerRef.Name)
	case o.Spec.Target.WorkflowRef != nil:
		w.reference(ctx, c, tp.Child("workflowRef", "name"), gvkWorkflow, o.Namespace, o.Spec.Target.WorkflowRef.Name)
	}
	validateCronScheduleSpec(c, spec, &o.Spec)
	return c.result("CronSchedule", o.Name)
}

func validateCronScheduleSpec(c *check, spec *field.Path, s *v1alpha1.CronScheduleSpec) {
	for i, expr := range s.Schedules {
		c.add(validateCron(c, spec.Child("schedules").Index(i), expr))
	}
	c.add(validateTimeZone(spec.Child("timeZone"), s.TimeZone))
	if s.Target.Params != nil {
		c.add(validateParams(c, spec.Child("target", "params"), s.Target.Params.Raw))
	}
}

// validateTimeZone accepts "" (UTC) and IANA zone names known to Go's embedded tzdata.
func validateTimeZone(path *field.Path, tz string) *field.Error {
	if tz == "" {
		return nil
	}
	if tz == "Local" || strings.TrimSpace(tz) != tz {
		return field.Invalid(path, tz, `must be an IANA time zone name such as "Europe/Paris" or "UTC"`)
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return field.Invalid(path, tz, `must be an IANA time zone name such as "Europe/Paris" or "UTC" (source: the IANA tz database embedded in the operator)`)
	}
	return nil
}

// validateParams checks a Workflow instance's params: JSON, at most 1 MiB.
func validateParams(c *check, path *field.Path, raw []byte) *field.Error {
	if !json.Valid(raw) {
		return field.Invalid(path, truncate(string(raw)), "must be a JSON document")
	}
	return c.tooMany(path, int64(len(raw)), limits.WorkflowParamsBytes, "the params' size (JSON)")
}
