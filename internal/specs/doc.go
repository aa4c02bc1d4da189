// Package specs builds the Kubernetes objects the reconcilers apply, as pure
// functions of a spec and its rendered config (no API calls): a Worker's ConfigMap,
// Deployment and Services (BuildWorkerChildren), and the shard set of a
// DurableObjectNamespace or a Workflow engine (BuildDONSChildren,
// BuildWorkflowChildren), a StatefulSet whose pod template is the Worker's with the
// shard's additions. Options are the manager-wide settings they use.
package specs
