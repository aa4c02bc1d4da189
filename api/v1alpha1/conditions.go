package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types shared by all kinds (metav1.Condition.Type).
const (
	// ConditionReady is True when the object serves what its spec asks for, at
	// status.observedGeneration.
	ConditionReady = "Ready"
	// ConditionProgressing is True while the children are being created or rolled.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when something that was working has failed; its reason
	// is a failure cause of internal/failure (e.g. "oom", "startup_error").
	ConditionDegraded = "Degraded"
)

// Condition reasons (metav1.Condition.Reason). Degraded additionally uses the cause
// names of internal/failure as reasons.
const (
	// ReasonReconciled: every child matches the spec and is available.
	ReasonReconciled = "Reconciled"
	// ReasonReconcileError: an API call failed; the message says which. Transient.
	ReasonReconcileError = "ReconcileError"
	// ReasonRollingOut: children are being created or updated. Transient.
	ReasonRollingOut = "RollingOut"
	// ReasonRolloutComplete: the current pod template is fully rolled out.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonResharding: a DurableObjectNamespace's shard count is changing
	// (docs/scaling.md); ReasonResharded: the change finished.
	ReasonResharding = "Resharding"
	ReasonResharded  = "Resharded"
	// ReasonPodsUnavailable: fewer ready pods than asked for.
	ReasonPodsUnavailable = "PodsUnavailable"
	// ReasonSecretNotFound: a secretKeyRef binding names a Secret or key that does not
	// exist; the message names it.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonConfigMapNotFound: spec.source.configMap names a ConfigMap that does not exist.
	ReasonConfigMapNotFound = "ConfigMapNotFound"
	// ReasonReferenceNotFound: a Worker, DurableObjectNamespace or Workflow named by a
	// reference does not exist.
	ReasonReferenceNotFound = "ReferenceNotFound"
	// ReasonInvalidSpec: the spec passed admission but cannot be rendered (for example a
	// module the renderer refuses); the message says why.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonChildConflict: an object the operator would create for this one (a Service,
	// ConfigMap, Deployment or StatefulSet of the same name) already exists and is not
	// controlled by it; the operator does not take it over. The message names it.
	ReasonChildConflict = "ChildConflict"
	// ReasonHealthy: no container of the object's pods has terminated abnormally.
	ReasonHealthy = "Healthy"
	// ReasonSuspended: a CronSchedule with spec.suspend=true.
	ReasonSuspended = "Suspended"
	// ReasonScheduled: a CronSchedule is armed and dispatching.
	ReasonScheduled = "Scheduled"
	// ReasonTargetNotReady: a CronSchedule's target has no ready pod.
	ReasonTargetNotReady = "TargetNotReady"
	// ReasonShared: a Shared user Worker (spec.dispatchPlacement) has no pods of its
	// own; its dispatch Workers' pods load it on its first call.
	ReasonShared = "Shared"
)

// LocalObjectReference names an object of a given kind in the same namespace.
// +structType=atomic
type LocalObjectReference struct {
	// name of the referenced object, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// FailureStatus is the last classified failure of an object's pods
// (see internal/failure and docs/failures.md).
type FailureStatus struct {
	// cause is the classified cause, e.g. "oom", "startup_error", "sqlite_full".
	Cause string `json:"cause"`
	// message is the evidence: the termination message or the log line that decided.
	// +optional
	Message string `json:"message,omitempty"`
	// pod is the name of the pod whose container failed.
	// +optional
	Pod string `json:"pod,omitempty"`
	// container is the name of the container that failed.
	// +optional
	Container string `json:"container,omitempty"`
	// exitCode of the container, when it terminated; absent for a failure read from the
	// log of a container that runs on (e.g. a connection the outbound policy refused).
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// time the container terminated, or wrote the log line.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// StorageSpec is the persistent storage of one shard.
type StorageSpec struct {
	// size of the PersistentVolumeClaim of each shard, a quantity such as "1Gi".
	// Default 1Gi. Cloudflare's documented ceiling is 10 GB per Durable Object
	// (https://developers.cloudflare.com/durable-objects/platform/limits/).
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// storageClassName of the PersistentVolumeClaims; empty means the cluster default.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// reclaimPolicy decides whether the PersistentVolumeClaims are deleted with the
	// owning object (Delete) or kept (Retain, the default: data outlives the object).
	// +kubebuilder:validation:Enum=Retain;Delete
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// ReclaimPolicy says what happens to persistent volumes when their owner is deleted.
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the PersistentVolumeClaims after the owner is deleted.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete deletes the PersistentVolumeClaims with the owner.
	ReclaimDelete ReclaimPolicy = "Delete"
)
