package podcontract

import "strings"

// OperatorLabelPrefix starts every label key of the operator's own.
const OperatorLabelPrefix = "fleet.workerd-operator.io/"

// IsOperatorLabel reports whether key is one the operator selects or admits pods by
// (its own prefix, or a well-known key it sets): spec.pod.labels may not set it, or a
// Worker's pods would join another object's Service, triggers or NetworkPolicy peers.
func IsOperatorLabel(key string) bool {
	switch key {
	case LabelName, LabelInstance, LabelManagedBy, LabelAppComponent:
		return true
	}
	return strings.HasPrefix(key, OperatorLabelPrefix) || strings.HasPrefix(key, LabelDispatcherPrefix)
}

// Container instances (docs/containers.md): the Pods the manager runs, one per instance
// of a Durable Object class that extends Container. Their LabelName is ContainerAppName,
// not AppName, so no NetworkPolicy that admits the operator's workerd pods
// (specs.WorkerdPodLabels) admits them; LabelComponent is ComponentContainer and LabelDONS
// names their DurableObjectNamespace.
const (
	// ContainerAppName is the LabelName of container instance pods.
	ContainerAppName = "workerd-container"
	// ComponentContainer is the LabelComponent (and app.kubernetes.io/component) of
	// container instance pods.
	ComponentContainer = "container"
	// LabelShardPod names the shard pod that started the instance (also its owner).
	LabelShardPod = OperatorLabelPrefix + "shard-pod"
	// LabelInternet is "true" on an instance that may reach the internet
	// (enableInternet): its NetworkPolicy then admits public egress; "false" otherwise.
	LabelInternet = OperatorLabelPrefix + "internet"
	// AnnotationContainerName holds the Docker name workerd gave the instance; the pod's
	// name is a hash of it (it may be longer than a DNS label).
	AnnotationContainerName = OperatorLabelPrefix + "container-name"
)
