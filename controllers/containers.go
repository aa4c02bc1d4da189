package controller

// The manager's containers API (internal/containers) runs each container instance of a
// DurableObjectNamespace as a Pod it creates and deletes, and gives the instances of
// each DurableObjectNamespace their NetworkPolicies. controller-gen reads RBAC markers
// from this package only, so they live here.

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;create;patch
