package api

// FileConfig is the engine's config file (JSON), for `workerd-operator sidecar
// --workflows-config <path>` (docs/workflows.md "Wiring"):
//
//	{"runnerURL": "http://<pod IP>:<runner port>", "profile": "paid",
//	 "workflows": [{"name": "orders", "steps": 10000, "concurrency": 50,
//	                "defaults": {"limit": 5, "delayMs": 10000, "backoff": "exponential", "timeoutMs": 600000}}]}
type FileConfig struct {
	RunnerURL string           `json:"runnerURL"`
	Profile   string           `json:"profile,omitempty"`
	Workflows []WorkflowConfig `json:"workflows"`
}

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
