package workflows

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/duration"
)

// WorkflowConfig is one Workflow served by the engine (from the Workflow spec).
type WorkflowConfig struct {
	// Name is the Workflow's name (metadata.name); it is also the runner's binding name for
	// the user's WorkflowEntrypoint class.
	Name string `json:"name"`
	// Steps is limits.steps: step.do calls per instance (sleeps do not count); 0 = the
	// profile's workflow_steps_default (internal/limits).
	Steps int `json:"steps,omitempty"`
	// Concurrency is concurrency.limit: instances running at once; 0 = the profile's
	// workflow_running_instances.
	Concurrency int `json:"concurrency,omitempty"`
	// SuccessRetentionMs / ErrorRetentionMs are spec.retention.success / error: how long
	// complete and terminated (success) or errored (error) instances are kept after they
	// end; 0 = the profile's workflow_retention_ms (30 days on paid).
	SuccessRetentionMs int64 `json:"successRetentionMs,omitempty"`
	ErrorRetentionMs   int64 `json:"errorRetentionMs,omitempty"`
	// Defaults overrides the default step config (spec.defaults); nil fields keep the
	// documented defaults (internal/limits workflow_retry_*_default, workflow_step_timeout_default_ms).
	Defaults *StepDefaults `json:"defaults,omitempty"`
}

// StepDefaults is spec.defaults: limit (retries), delay and timeout in milliseconds, backoff
// constant|linear|exponential.
type StepDefaults struct {
	Limit     *int   `json:"limit,omitempty"`
	DelayMs   *int64 `json:"delayMs,omitempty"`
	Backoff   string `json:"backoff,omitempty"`
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
}

// StepConfig is a step's resolved config: retries {limit, delay ms, backoff}, timeout ms per attempt.
type StepConfig struct {
	Retries struct {
		Limit   int    `json:"limit"`
		DelayMs int64  `json:"delay"`
		Backoff string `json:"backoff"`
	} `json:"retries"`
	TimeoutMs int64 `json:"timeout"`
}

// DelayMs is the wait after failed attempt n (1-based) under this config: exponential
// delay × 2^(n−1), linear delay × n, constant delay (workers-sdk lib/retries.ts).
func (c StepConfig) DelayMs(n int) int64 {
	d := c.Retries.DelayMs
	switch c.Retries.Backoff {
	case "exponential":
		for i := 1; i < n; i++ {
			d *= 2
		}
		return d
	case "linear":
		return d * int64(n)
	}
	return d
}

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
func (e *Engine) resolveConfig(wf *WorkflowConfig, name string, raw json.RawMessage) (StepConfig, error) {
	var c StepConfig
	c.Retries.Limit = int(e.lim(limits.WorkflowRetryLimit))
	c.Retries.DelayMs = e.lim(limits.WorkflowRetryDelayMs)
	c.Retries.Backoff = "exponential"
	c.TimeoutMs = e.lim(limits.WorkflowStepTimeoutMs)
	if d := wf.Defaults; d != nil {
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
	}
	bad := func(format string, a ...any) (StepConfig, error) {
		return StepConfig{}, fmt.Errorf("Step config for %q is in a invalid format: %s", name, fmt.Sprintf(format, a...))
	}
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	var in struct {
		Retries *struct {
			Limit   *float64        `json:"limit"`
			Delay   json.RawMessage `json:"delay"`
			Backoff *string         `json:"backoff"`
		} `json:"retries"`
		Timeout json.RawMessage `json:"timeout"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return bad("%v", err)
	}
	if r := in.Retries; r != nil {
		if r.Limit != nil {
			max := e.lim(limits.WorkflowRetriesPerStep)
			if *r.Limit < 0 || *r.Limit > float64(max) || *r.Limit != float64(int64(*r.Limit)) {
				return bad("retries.limit %v: want an integer 0 to %d (%s)", *r.Limit, max, e.cite(limits.WorkflowRetriesPerStep))
			}
			c.Retries.Limit = int(*r.Limit)
		}
		if len(r.Delay) > 0 && string(r.Delay) != "null" {
			d, err := duration.ParseJSON("retries.delay", r.Delay)
			if err != nil {
				return bad("%v", err)
			}
			c.Retries.DelayMs = d
		}
		if r.Backoff != nil {
			switch *r.Backoff {
			case "constant", "linear", "exponential":
				c.Retries.Backoff = *r.Backoff
			default:
				return bad("retries.backoff %q: want constant, linear or exponential", *r.Backoff)
			}
		}
	}
	if len(in.Timeout) > 0 && string(in.Timeout) != "null" {
		d, err := duration.ParseJSON("timeout", in.Timeout)
		if err != nil {
			return bad("%v", err)
		}
		c.TimeoutMs = d
	}
	return c, nil
}
