package controller

import "github.com/workerd-operator/workerd-operator/internal/podcontract"

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

// selectorLabels are the immutable subset used in Deployment/StatefulSet selectors.
func selectorLabels(component, ownerLabel, owner string) map[string]string {
	return map[string]string{
		podcontract.LabelName:      podcontract.AppName,
		podcontract.LabelComponent: component,
		ownerLabel:                 owner,
	}
}
