package controllers

// Labels and annotations on every child object and pod (docs/pod-contract.md).
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "fleet.workerd-operator.io/component"
	LabelWorker    = "fleet.workerd-operator.io/worker"
	LabelDONS      = "fleet.workerd-operator.io/durable-object-namespace"
	LabelWorkflow  = "fleet.workerd-operator.io/workflow"

	// AnnotationVersion on the pod template is the rendered config's content hash.
	AnnotationVersion = "fleet.workerd-operator.io/version"
	// AnnotationInputs on the pod template hashes the referenced Secrets' and
	// ConfigMaps' resourceVersions, so a change of their data rolls the pods.
	AnnotationInputs = "fleet.workerd-operator.io/inputs"

	ComponentWorker         = "worker"
	ComponentDOShard        = "do-shard"
	ComponentWorkflowEngine = "workflow-engine"

	managedBy = "workerd-operator"
	appName   = "workerd"

	// FieldOwner is the server-side apply field manager of every object the
	// controllers write.
	FieldOwner = "workerd-operator"
)

// commonLabels are the labels of every child of an owner of the given component.
func commonLabels(component, ownerLabel, owner string) map[string]string {
	return map[string]string{
		LabelName:      appName,
		LabelInstance:  owner,
		LabelManagedBy: managedBy,
		LabelComponent: component,
		ownerLabel:     owner,
	}
}

// selectorLabels are the immutable subset used in Deployment/StatefulSet selectors.
func selectorLabels(component, ownerLabel, owner string) map[string]string {
	return map[string]string{
		LabelName:      appName,
		LabelComponent: component,
		ownerLabel:     owner,
	}
}
