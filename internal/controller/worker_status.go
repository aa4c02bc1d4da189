package controller

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// computeWorkerStatus is the one place a Worker's status is computed: from the live
// Deployment and pods and the error of the pass (nil for a successful pass).
func computeWorkerStatus(w *fleetv1alpha1.Worker, dep *appsv1.Deployment, pods []corev1.Pod, version string, opts Options, err error) fleetv1alpha1.WorkerStatus {
	st := *w.Status.DeepCopy()
	gen := w.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}

	if setPassConditions(&st.Conditions, &st.LastFailure, gen, pods, err) {
		return st
	}

	desired := ptr.Deref(w.Spec.Replicas, 1)
	st.ObservedGeneration = gen
	st.Version = version
	st.URL = WorkerURL(w, opts.ClusterDomain)
	st.Selector = metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: selectorLabels(podcontract.ComponentWorker, podcontract.LabelWorker, w.Name)})
	st.Replicas = dep.Status.Replicas
	st.ReadyReplicas = dep.Status.ReadyReplicas

	rolled := dep.Status.ObservedGeneration >= dep.Generation &&
		dep.Status.UpdatedReplicas == desired && dep.Status.Replicas == desired &&
		dep.Status.AvailableReplicas == desired
	switch {
	case rolled:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled, "all replicas run the current version")
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, fleetv1alpha1.ReasonRolloutComplete, "rollout complete")
	case dep.Status.UpdatedReplicas < desired || dep.Status.Replicas > desired:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonRollingOut, "rolling out the current version")
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "rolling out the current version")
	default:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonPodsUnavailable, "waiting for pods to become ready")
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "waiting for pods to become ready")
	}
	return st
}

func metaIsTrue(conds []metav1.Condition, t string) bool {
	return meta.IsStatusConditionTrue(conds, t)
}

// equalStatus compares statuses ignoring condition transition times, which
// meta.SetStatusCondition keeps unchanged when the status did not change.
func equalStatus(a, b fleetv1alpha1.WorkerStatus) bool {
	return reflect.DeepEqual(a, b)
}
