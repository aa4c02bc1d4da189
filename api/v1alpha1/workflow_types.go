package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackoffType is a step retry backoff (Cloudflare WorkflowBackoff).
// +kubebuilder:validation:Enum=constant;linear;exponential
type BackoffType string

// Backoff types: constant waits delay; linear delay × attempt; exponential delay × 2^(attempt−1).
const (
	BackoffConstant    BackoffType = "constant"
	BackoffLinear      BackoffType = "linear"
	BackoffExponential BackoffType = "exponential"
)

// WorkflowDurationPattern accepts Cloudflare's WorkflowDuration strings ("10 seconds",
// "1 minute", "2 hours") or a number of milliseconds given as a string.
const WorkflowDurationPattern = `^([0-9]+|[0-9]+ (millisecond|second|minute|hour|day|week|month|year)s?)$`

// WorkflowSpec is a WorkflowEntrypoint class of a Worker, run with Cloudflare Workflows
// semantics by the engine in the sidecar.
type WorkflowSpec struct {
	// workerRef names the Worker whose code exports the class.
	// +required
	WorkerRef LocalObjectReference `json:"workerRef"`

	// className is the exported WorkflowEntrypoint class.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_$][A-Za-z0-9_$]*$`
	// +required
	ClassName string `json:"className"`

	// limits of each instance.
	// +optional
	Limits *WorkflowLimits `json:"limits,omitempty"`

	// concurrency bounds the running instances.
	// +optional
	Concurrency *WorkflowConcurrency `json:"concurrency,omitempty"`

	// retention says how long finished instances are kept.
	// +optional
	Retention *WorkflowRetention `json:"retention,omitempty"`

	// defaults for every step.do that does not set its own config.
	// +optional
	Defaults *StepDefaults `json:"defaults,omitempty"`

	// schedules are Cloudflare-dialect cron expressions (each at most 256 characters, at
	// most 16); each firing creates an instance whose event carries the schedule.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	// +optional
	Schedules []string `json:"schedules,omitempty"`

	// engine configures the engine shards holding instance state.
	// +optional
	Engine *WorkflowEngineSpec `json:"engine,omitempty"`
}

// WorkflowLimits are per-instance limits.
type WorkflowLimits struct {
	// steps is the maximum number of steps per instance, 1 to 25000; default 10000
	// (https://developers.cloudflare.com/workflows/reference/limits/;
	// sleeps do not count). The Free profile allows at most 1024.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=25000
	// +kubebuilder:validation:XValidation:rule="self <= 25000",message="must be at most 25000 (the API maximum, for every profile; limit workflow_steps; source: https://developers.cloudflare.com/workflows/reference/limits/)"
	// +optional
	Steps *int32 `json:"steps,omitempty"`
}

// WorkflowConcurrency bounds running instances.
type WorkflowConcurrency struct {
	// limit is the maximum number of running instances, 1 to 10000
	// (https://developers.cloudflare.com/workflows/reference/limits/); waiting instances
	// (sleep, waitForEvent, retry delay) do not count. Queued instances start oldest
	// first.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:validation:XValidation:rule="self <= 10000",message="must be at most 10000 (the API maximum, for every profile; limit workflow_running_instances; source: https://developers.cloudflare.com/workflows/reference/limits/)"
	// +optional
	Limit *int32 `json:"limit,omitempty"`
}

// WorkflowRetention says how long finished instances are kept.
type WorkflowRetention struct {
	// success is how long complete instances are kept, e.g. "30 days". Default 30 days.
	// +kubebuilder:validation:Pattern=`^([0-9]+|[0-9]+ (millisecond|second|minute|hour|day|week|month|year)s?)$`
	// +optional
	Success string `json:"success,omitempty"`
	// error is how long errored and terminated instances are kept. Default 30 days.
	// +kubebuilder:validation:Pattern=`^([0-9]+|[0-9]+ (millisecond|second|minute|hour|day|week|month|year)s?)$`
	// +optional
	Error string `json:"error,omitempty"`
}

// StepDefaults is the default step config (Cloudflare WorkflowStepConfig).
type StepDefaults struct {
	// retries of a failed step attempt. Default {limit: 5, delay: "10 seconds",
	// backoff: exponential}.
	// +optional
	Retries *StepRetries `json:"retries,omitempty"`
	// timeout of one attempt, e.g. "10 minutes" (the default).
	// +kubebuilder:validation:Pattern=`^([0-9]+|[0-9]+ (millisecond|second|minute|hour|day|week|month|year)s?)$`
	// +optional
	Timeout string `json:"timeout,omitempty"`
}

// StepRetries is a step retry policy.
type StepRetries struct {
	// limit is the number of retries after the first attempt, 0 to 10000.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:validation:XValidation:rule="self <= 10000",message="must be at most 10000 (the API maximum, for every profile; limit workflow_retries_per_step; source: https://developers.cloudflare.com/workflows/reference/limits/)"
	// +optional
	Limit *int32 `json:"limit,omitempty"`
	// delay before the first retry, e.g. "10 seconds".
	// +kubebuilder:validation:Pattern=`^([0-9]+|[0-9]+ (millisecond|second|minute|hour|day|week|month|year)s?)$`
	// +optional
	Delay string `json:"delay,omitempty"`
	// backoff: constant, linear or exponential.
	// +optional
	Backoff BackoffType `json:"backoff,omitempty"`
}

// WorkflowEngineSpec configures the engine StatefulSet.
type WorkflowEngineSpec struct {
	// shards is the number of engine pods, 1 to 16; instances are spread by id. Default 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	Shards *int32 `json:"shards,omitempty"`
	// storage of each engine shard (the sidecar's store).
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`
	// backup ships the engine's store (instances, steps, events) continuously to an S3-compatible bucket (docs/backup.md).
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`
	// restore starts the engine from a backup when its volume is empty (docs/backup.md).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="restore is immutable: it applies to the store's first start (docs/backup.md)"
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
}

// WorkflowInstanceCounts counts instances by status.
type WorkflowInstanceCounts struct {
	Queued          int64 `json:"queued,omitempty"`
	Running         int64 `json:"running,omitempty"`
	Paused          int64 `json:"paused,omitempty"`
	Waiting         int64 `json:"waiting,omitempty"`
	WaitingForPause int64 `json:"waitingForPause,omitempty"`
	Complete        int64 `json:"complete,omitempty"`
	Errored         int64 `json:"errored,omitempty"`
	Terminated      int64 `json:"terminated,omitempty"`
}

// WorkflowStatus is what the operator observed.
type WorkflowStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, Progressing, Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// instances counts instances by status.
	// +optional
	Instances WorkflowInstanceCounts `json:"instances,omitempty"`
	// readyShards is the number of ready engine shards.
	// +optional
	ReadyShards int32 `json:"readyShards,omitempty"`
	// backup is where the engine's backup stands (spec.engine.backup).
	// +optional
	Backup *BackupStatus `json:"backup,omitempty"`
}

// Workflow is a Cloudflare Workflow: a WorkflowEntrypoint class run durably.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wf,categories=workerd
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Worker",type=string,JSONPath=`.spec.workerRef.name`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.className`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.instances.running`
// +kubebuilder:printcolumn:name="Complete",type=integer,JSONPath=`.status.instances.complete`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workflow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired workflow.
	// +required
	Spec WorkflowSpec `json:"spec"`
	// status is what the operator observed.
	// +optional
	Status WorkflowStatus `json:"status,omitempty"`
}

// WorkflowList is a list of Workflows.
// +kubebuilder:object:root=true
type WorkflowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workflow `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Workflow{}, &WorkflowList{})
}
