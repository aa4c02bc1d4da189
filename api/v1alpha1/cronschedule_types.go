package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConcurrencyPolicy says what a firing does while the previous run of the same
// schedule is still going.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

// Concurrency policies (as Kubernetes CronJob names them).
const (
	ConcurrencyAllow   ConcurrencyPolicy = "Allow"
	ConcurrencyForbid  ConcurrencyPolicy = "Forbid"
	ConcurrencyReplace ConcurrencyPolicy = "Replace"
)

// CronScheduleSpec fires Cloudflare-dialect cron expressions at a Worker's scheduled()
// handler or into a Workflow, exactly once per slot across the fleet.
type CronScheduleSpec struct {
	// schedules are Cloudflare-dialect cron expressions: five fields, day-of-week 1-7 with
	// 1 = Sunday, L/W/# supported (docs/cron.md). 1 to 16 entries of at
	// most 256 characters each; checked by the webhook with the operator's parser.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=set
	// +required
	Schedules []string `json:"schedules"`

	// target is what each firing invokes.
	// +required
	Target CronTarget `json:"target"`

	// timeZone is an IANA time zone name for the expressions, e.g. "Europe/Paris".
	// Default UTC (Cloudflare runs crons in UTC only; this goes beyond it).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// concurrencyPolicy: Allow (default), Forbid (skip a slot while the previous run is
	// going) or Replace.
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// startingDeadlineSeconds is the catch-up window: after downtime, missed slots newer
	// than this many seconds are still dispatched, older ones are skipped. 0 to 86400;
	// default: only the current slot.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// suspend stops dispatching; slots passed while suspended are not caught up.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// historyLimit is how many past events status.history keeps, 0 to 100. Default 10.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	HistoryLimit *int32 `json:"historyLimit,omitempty"`
}

// CronTarget is a Worker (its scheduled() handler) or a Workflow (a new instance).
// +kubebuilder:validation:XValidation:rule="has(self.workerRef) != has(self.workflowRef)",message="exactly one of workerRef or workflowRef must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.params) || has(self.workflowRef)",message="params is only used with workflowRef"
type CronTarget struct {
	// workerRef names a Worker whose scheduled() handler is called.
	// +optional
	WorkerRef *LocalObjectReference `json:"workerRef,omitempty"`
	// workflowRef names a Workflow in which each firing creates an instance.
	// +optional
	WorkflowRef *LocalObjectReference `json:"workflowRef,omitempty"`
	// params of each created Workflow instance: a JSON object of at most 1 MiB
	// (event.payload in the workflow's run()).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Params *apiextensionsv1.JSON `json:"params,omitempty"`
}

// CronOutcome is the outcome of one dispatch (workerd's ScheduledResult outcome, plus
// the dispatcher's own).
type CronOutcome string

// Outcomes recorded in status.history.
const (
	CronOutcomeOK               CronOutcome = "ok"
	CronOutcomeException        CronOutcome = "exception"
	CronOutcomeExceededWallTime CronOutcome = "exceededWallTime"
	CronOutcomeExceededCPU      CronOutcome = "exceededCpu"
	CronOutcomeSkipped          CronOutcome = "skipped"
	CronOutcomeUnreachable      CronOutcome = "unreachable"
)

// CronScheduleState is the dispatcher's record of one expression.
type CronScheduleState struct {
	// cron is the expression, as written in spec.schedules.
	Cron string `json:"cron"`
	// lastScheduleTime is the last slot claimed for dispatch. The dispatcher writes it
	// (optimistic concurrency) before dispatching, so a slot is dispatched at most once.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// nextScheduleTime is the next slot.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// claimedAheadBy names the dispatcher that claimed lastScheduleTime before it was
	// due (claim-ahead, docs/cron.md); empty when the slot was claimed as it came due.
	// Whether that dispatcher went on to dispatch the slot is in its dispatch record
	// (a Lease in the operator's namespace): a new leader dispatches a slot claimed
	// ahead by a dispatcher it fenced before that dispatcher confirmed the slot.
	// +optional
	ClaimedAheadBy string `json:"claimedAheadBy,omitempty"`
}

// CronEvent is one row of the "Past Cron Events" table.
type CronEvent struct {
	// cron expression that fired.
	Cron string `json:"cron"`
	// scheduledTime is the slot (what the handler sees as event.scheduledTime).
	ScheduledTime metav1.Time `json:"scheduledTime"`
	// start is when the dispatch began.
	// +optional
	Start *metav1.Time `json:"start,omitempty"`
	// durationMs of the dispatch in milliseconds.
	// +optional
	DurationMs int64 `json:"durationMs,omitempty"`
	// outcome: ok, exception, exceededWallTime, exceededCpu, skipped or unreachable.
	Outcome CronOutcome `json:"outcome"`
	// noRetry is the handler's noRetry flag.
	// +optional
	NoRetry bool `json:"noRetry,omitempty"`
	// message gives details, e.g. the exception or the pod that ran it.
	// +optional
	Message string `json:"message,omitempty"`
}

// CronScheduleStatus is what the dispatcher observed and did.
type CronScheduleStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// lastScheduleTime is the latest slot claimed over all expressions.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// schedules holds per-expression dispatcher state.
	// +listType=map
	// +listMapKey=cron
	// +optional
	Schedules []CronScheduleState `json:"schedules,omitempty"`
	// history is the most recent events, newest first, at most spec.historyLimit.
	// +listType=atomic
	// +optional
	History []CronEvent `json:"history,omitempty"`
}

// CronSchedule fires Cloudflare-dialect cron expressions at a Worker or a Workflow.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cron,categories=workerd
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Schedules",type=string,JSONPath=`.spec.schedules`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.history[0].scheduledTime`,description="slot of the newest recorded run; empty before the first (lastScheduleTime may be a slot claimed ahead, in the future)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CronSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired schedule.
	// +required
	Spec CronScheduleSpec `json:"spec"`
	// status is what the dispatcher observed.
	// +optional
	Status CronScheduleStatus `json:"status,omitempty"`
}

// CronScheduleList is a list of CronSchedules.
// +kubebuilder:object:root=true
type CronScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CronSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CronSchedule{}, &CronScheduleList{})
}
