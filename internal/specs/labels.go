package specs

import (
	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// commonLabels are the labels of every child of an owner of the given component.
func commonLabels(component, ownerLabel, owner string) map[string]string {
	return map[string]string{
		podcontract.LabelName:      podcontract.AppName,
		podcontract.LabelInstance:  owner,
		podcontract.LabelManagedBy: podcontract.ManagedBy,
		podcontract.LabelComponent: component,
		ownerLabel:                 owner,
	}
}

// SelectorLabels are the immutable subset used in Deployment/StatefulSet selectors.
func SelectorLabels(component, ownerLabel, owner string) map[string]string {
	return map[string]string{
		podcontract.LabelName:      podcontract.AppName,
		podcontract.LabelComponent: component,
		ownerLabel:                 owner,
	}
}

// WorkerSelector selects the pods (and ReplicaSets, ConfigMaps) of the Worker named worker.
func WorkerSelector(worker string) map[string]string {
	return SelectorLabels(podcontract.ComponentWorker, podcontract.LabelWorker, worker)
}

// DONSSelector selects the shard pods (and ConfigMaps) of d.
func DONSSelector(d *fleetv1alpha1.DurableObjectNamespace) map[string]string {
	return SelectorLabels(podcontract.ComponentDOShard, podcontract.LabelDONS, d.Name)
}

// WorkflowSelector selects the engine pod (and ConfigMaps) of the Workflow named workflow.
func WorkflowSelector(workflow string) map[string]string {
	return SelectorLabels(podcontract.ComponentWorkflowEngine, podcontract.LabelWorkflow, workflow)
}
