// Package v1alpha1 holds the API of workerd-operator, group fleet.workerd-operator.io:
// Worker, DurableObjectNamespace, Workflow and CronSchedule.
//
// Validation that CEL can express lives on these types as kubebuilder markers and
// becomes x-kubernetes-validations in the CRDs; what needs profiles, other objects or
// parsing (limits, references, cron semantics) lives in internal/webhook.
// No field carries a schema default: the product applies its defaults where it uses a
// value, so that a GitOps diff of what the user wrote stays empty.
//
// +kubebuilder:object:generate=true
// +groupName=fleet.workerd-operator.io
package v1alpha1
