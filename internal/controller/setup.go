package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
)

// SetupAll registers every reconciler of the operator with the manager.
func SetupAll(mgr ctrl.Manager, opts Options) error {
	if err := (&WorkerReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("workerd-operator"),
		Options:  opts,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&DurableObjectNamespaceReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Options: opts}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&WorkflowReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Options: opts}).SetupWithManager(mgr); err != nil {
		return err
	}
	return nil
}
