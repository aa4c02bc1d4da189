package workflows

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
	"github.com/workerd-operator/workerd-operator/internal/workflows/duration"
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9-_]*$`)

func (e *Engine) lim(n limits.Name) int64 { return e.o.Table.Get(e.o.Profile, n) }

func (e *Engine) cite(n limits.Name) string {
	l, _ := e.o.Table.Limit(n)
	return l.Cite(e.o.Profile)
}

// checkName validates an instance id or event type (pattern and length, limit n).
func (e *Engine) checkName(field, v string, n limits.Name) error {
	max := e.lim(n)
	if v == "" || int64(len(v)) > max || !namePattern.MatchString(v) {
		return fmt.Errorf("%s %q is invalid: want 1 to %d characters matching %s (%s)", field, v, max, namePattern, e.cite(n))
	}
	return nil
}

func (e *Engine) checkPayload(field string, raw json.RawMessage) error {
	max := e.lim(limits.WorkflowParamsBytes)
	if int64(len(raw)) > max {
		return fmt.Errorf("%s is %d bytes of JSON, over the %d-byte limit (%s)", field, len(raw), max, e.cite(limits.WorkflowParamsBytes))
	}
	return nil
}

// resolveConfig merges a step's config (JSON as given to step.do) over the workflow's
// defaults and the documented ones.
func (e *Engine) resolveConfig(wf *api.WorkflowConfig, name string, raw json.RawMessage) (api.StepConfig, error) {
	c := e.defaultConfig(wf)
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	if err := e.applyStepConfig(&c, raw); err != nil {
		return api.StepConfig{}, fmt.Errorf("Step config for %q is in a invalid format: %w", name, err)
	}
	return c, nil
}

// defaultConfig is the workflow's step config: its spec.defaults over the documented ones.
func (e *Engine) defaultConfig(wf *api.WorkflowConfig) api.StepConfig {
	var c api.StepConfig
	c.Retries.Limit = int(e.lim(limits.WorkflowRetryLimit))
	c.Retries.DelayMs = e.lim(limits.WorkflowRetryDelayMs)
	c.Retries.Backoff = "exponential"
	c.TimeoutMs = e.lim(limits.WorkflowStepTimeoutMs)
	d := wf.Defaults
	if d == nil {
		return c
	}
	if d.Limit != nil {
		c.Retries.Limit = *d.Limit
	}
	if d.DelayMs != nil {
		c.Retries.DelayMs = *d.DelayMs
	}
	if d.Backoff != "" {
		c.Retries.Backoff = d.Backoff
	}
	if d.TimeoutMs != nil {
		c.TimeoutMs = *d.TimeoutMs
	}
	return c
}

// stepConfigRetries is step.do's config.retries as given.
type stepConfigRetries struct {
	Limit   *float64        `json:"limit"`
	Delay   json.RawMessage `json:"delay"`
	Backoff *string         `json:"backoff"`
}

// applyStepConfig sets the fields raw (a step.do config) gives on c.
func (e *Engine) applyStepConfig(c *api.StepConfig, raw json.RawMessage) error {
	var in struct {
		Retries *stepConfigRetries `json:"retries"`
		Timeout json.RawMessage    `json:"timeout"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return err
	}
	if in.Retries != nil {
		if err := e.applyRetries(c, in.Retries); err != nil {
			return err
		}
	}
	if len(in.Timeout) > 0 && string(in.Timeout) != "null" {
		d, err := duration.ParseJSON("timeout", in.Timeout)
		if err != nil {
			return err
		}
		if d == 0 {
			return fmt.Errorf("timeout: must be more than 0")
		}
		c.TimeoutMs = d
	}
	return nil
}

func (e *Engine) applyRetries(c *api.StepConfig, r *stepConfigRetries) error {
	if r.Limit != nil {
		max := e.lim(limits.WorkflowRetriesPerStep)
		if *r.Limit < 0 || *r.Limit > float64(max) || *r.Limit != float64(int64(*r.Limit)) {
			return fmt.Errorf("retries.limit %v: want an integer 0 to %d (%s)", *r.Limit, max, e.cite(limits.WorkflowRetriesPerStep))
		}
		c.Retries.Limit = int(*r.Limit)
	}
	if len(r.Delay) > 0 && string(r.Delay) != "null" {
		d, err := duration.ParseJSON("retries.delay", r.Delay)
		if err != nil {
			return err
		}
		c.Retries.DelayMs = d
	}
	if r.Backoff != nil {
		switch *r.Backoff {
		case "constant", "linear", "exponential":
			c.Retries.Backoff = *r.Backoff
		default:
			return fmt.Errorf("retries.backoff %q: want constant, linear or exponential", *r.Backoff)
		}
	}
	return nil
}
