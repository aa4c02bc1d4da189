package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/cron"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/duration"
)

// WorkflowDefaulter defaults a Workflow: spec.limits.steps (the profile of the Worker
// it runs in: 1,024 on Free, 10,000 otherwise; left unset while that Worker does not
// exist) and spec.defaults (Cloudflare's default
// step config: retries {limit 5, delay "10 seconds", backoff exponential}, timeout
// "10 minutes"), field by field, never changing a value that is set.
type WorkflowDefaulter struct{ w *Webhooks }

// WorkflowValidator validates a Workflow (see the package comment).
type WorkflowValidator struct{ w *Webhooks }

var (
	_ admission.Defaulter[*v1alpha1.Workflow] = (*WorkflowDefaulter)(nil)
	_ admission.Validator[*v1alpha1.Workflow] = (*WorkflowValidator)(nil)
)

// WorkflowDefaulter returns the Workflow defaulter.
func (w *Webhooks) WorkflowDefaulter() *WorkflowDefaulter { return &WorkflowDefaulter{w} }

// WorkflowValidator returns the Workflow validator.
func (w *Webhooks) WorkflowValidator() *WorkflowValidator { return &WorkflowValidator{w} }

// Default implements admission.Defaulter.
func (d *WorkflowDefaulter) Default(ctx context.Context, wf *v1alpha1.Workflow) error {
	s := &wf.Spec
	t := d.w.opts.Limits
	if s.Limits == nil {
		s.Limits = &v1alpha1.WorkflowLimits{}
	}
	if s.Limits.Steps == nil {
		// Only under the profile of an existing Worker: written from the default
		// profile, the value would stay when the Worker arrives with a lower ceiling
		// (GitOps applies in any order). Unset, the matchCondition sends every update
		// here until the Worker exists; meanwhile the engine uses its own default.
		if p, found, err := d.w.workerProfile(ctx, wf.Namespace, s.WorkerRef.Name); found && err == nil {
			s.Limits.Steps = ptr(int32(defaultValue(t, p, limits.WorkflowStepsDefault, limits.WorkflowSteps)))
		}
	}
	if s.Defaults == nil {
		s.Defaults = &v1alpha1.StepDefaults{}
	}
	if s.Defaults.Retries == nil {
		s.Defaults.Retries = &v1alpha1.StepRetries{}
	}
	r := s.Defaults.Retries
	if r.Limit == nil {
		r.Limit = ptr(int32(t.Get(limits.Paid, limits.WorkflowRetryLimit)))
	}
	if r.Delay == "" {
		r.Delay = duration.Format(t.Get(limits.Paid, limits.WorkflowRetryDelayMs))
	}
	if r.Backoff == "" {
		r.Backoff = v1alpha1.BackoffExponential
	}
	if s.Defaults.Timeout == "" {
		s.Defaults.Timeout = duration.Format(t.Get(limits.Paid, limits.WorkflowStepTimeoutMs))
	}
	return nil
}

// ValidateCreate implements admission.Validator.
func (v *WorkflowValidator) ValidateCreate(ctx context.Context, wf *v1alpha1.Workflow) (admission.Warnings, error) {
	return v.w.ValidateWorkflow(ctx, wf)
}

// ValidateUpdate implements admission.Validator.
func (v *WorkflowValidator) ValidateUpdate(ctx context.Context, _, wf *v1alpha1.Workflow) (admission.Warnings, error) {
	return v.w.ValidateWorkflow(ctx, wf)
}

// ValidateDelete implements admission.Validator; deletes are always allowed.
func (v *WorkflowValidator) ValidateDelete(context.Context, *v1alpha1.Workflow) (admission.Warnings, error) {
	return nil, nil
}

// ValidateWorkflow checks a Workflow against the profile of the Worker it runs in.
func (w *Webhooks) ValidateWorkflow(ctx context.Context, wf *v1alpha1.Workflow) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	c := &check{t: w.opts.Limits}
	c.p = w.profileFromWorker(ctx, c, spec.Child("workerRef", "name"), wf.Namespace, wf.Spec.WorkerRef.Name)
	validateWorkflowSpec(c, spec, &wf.Spec)
	return c.result("Workflow", wf.Name)
}

// validateWorkflowSpec holds the Workflow checks that need no lookups.
func validateWorkflowSpec(c *check, spec *field.Path, s *v1alpha1.WorkflowSpec) {
	if s.Limits != nil && s.Limits.Steps != nil {
		c.add(validateMin(spec.Child("limits", "steps"), int64(*s.Limits.Steps), 1))
		c.add(c.atMost(spec.Child("limits", "steps"), int64(*s.Limits.Steps), limits.WorkflowSteps))
	}
	if s.Concurrency != nil && s.Concurrency.Limit != nil {
		c.add(validateMin(spec.Child("concurrency", "limit"), int64(*s.Concurrency.Limit), 1))
		c.add(c.atMost(spec.Child("concurrency", "limit"), int64(*s.Concurrency.Limit), limits.WorkflowRunningInstances))
	}
	if s.Retention != nil {
		c.add(c.validateDuration(spec.Child("retention", "success"), s.Retention.Success, &zeroRetention, limits.WorkflowRetentionMs))
		c.add(c.validateDuration(spec.Child("retention", "error"), s.Retention.Error, &zeroRetention, limits.WorkflowRetentionMs))
	}
	if s.Defaults != nil {
		dp := spec.Child("defaults")
		c.add(c.validateDuration(dp.Child("timeout"), s.Defaults.Timeout, &zeroTimeout, limits.WorkflowSleepMs))
		if r := s.Defaults.Retries; r != nil {
			rp := dp.Child("retries")
			if r.Limit != nil {
				c.add(validateMin(rp.Child("limit"), int64(*r.Limit), 0))
				c.add(c.atMost(rp.Child("limit"), int64(*r.Limit), limits.WorkflowRetriesPerStep))
			}
			c.add(c.validateDuration(rp.Child("delay"), r.Delay, nil, limits.WorkflowSleepMs)) // delay 0 retries at once
			c.add(validateBackoff(rp.Child("backoff"), r.Backoff))
		}
	}
	for i, expr := range s.Schedules {
		c.add(validateCron(c, spec.Child("schedules").Index(i), expr))
	}
}

// Why a zero duration is rejected, per field (validateDuration).
var (
	zeroTimeout   = "a step attempt with timeout 0 can never succeed; source: " + limits.DocWorkflowsAPI
	zeroRetention = "a finished instance kept for 0 would be deleted before its status or output could be read; source: " + limits.DocWorkflowsLimits
)

func validateMin(path *field.Path, v, min int64) *field.Error {
	if v < min {
		return field.Invalid(path, v, fmt.Sprintf("must be at least %d", min))
	}
	return nil
}

// validateBackoff accepts Cloudflare's WorkflowBackoff values (or empty).
func validateBackoff(path *field.Path, b v1alpha1.BackoffType) *field.Error {
	switch b {
	case "", v1alpha1.BackoffConstant, v1alpha1.BackoffLinear, v1alpha1.BackoffExponential:
		return nil
	}
	return field.NotSupported(path, b, []string{string(v1alpha1.BackoffConstant), string(v1alpha1.BackoffLinear), string(v1alpha1.BackoffExponential)})
}

// validateCron checks one Cloudflare-dialect cron expression with internal/cron's
// admission check (it must parse and fire at least once) and its length.
func validateCron(c *check, path *field.Path, expr string) *field.Error {
	if err := c.tooMany(path, int64(len(expr)), limits.CronExpressionChar, "the expression's length"); err != nil {
		return err
	}
	if _, err := cron.Validate(expr); err != nil {
		return field.Invalid(path, expr, err.Error()+" (source: "+limits.DocCronTriggers+")")
	}
	return nil
}
