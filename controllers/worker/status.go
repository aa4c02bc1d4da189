package worker

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// computeStatus is the one place a Worker's status is computed: from the live
// Deployment and pods, the newest failure read from the pods' logs (nil: none) and the
// error of the pass (nil for a successful pass).
func computeStatus(w *fleetv1alpha1.Worker, res passResult, pods []corev1.Pod, logged *failure.Failure, opts specs.Options, err error) fleetv1alpha1.WorkerStatus {
	st := *w.Status.DeepCopy()
	gen := w.Generation
	if res.versions != nil {
		st.Versions = res.versions
	}
	if common.SetPassConditions(&st.Conditions, &st.LastFailure, gen, pods, logged, err) {
		return st
	}
	dep, version := res.dep, res.version
	if !slices.Equal(st.Deployment, res.deployed) {
		if st.Deployment != nil {
			st.PreviousDeployment = st.Deployment
		}
		st.Deployment = res.deployed
	}
	desired := ptr.Deref(w.Spec.Replicas, 1)
	st.ObservedGeneration = gen
	st.Version = version
	st.URL = specs.WorkerURL(w, opts.ClusterDomain)
	st.Selector = metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: specs.WorkerSelector(w.Name)})
	st.Replicas = dep.Status.Replicas
	st.ReadyReplicas = dep.Status.ReadyReplicas

	c := common.Conditions{List: &st.Conditions, Generation: gen}
	rolled := res.settled && dep.Status.ObservedGeneration >= dep.Generation &&
		dep.Status.UpdatedReplicas == desired && dep.Status.Replicas == desired &&
		dep.Status.AvailableReplicas == desired
	switch {
	case rolled:
		c.SetReady(metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled, "all replicas run the current version",
			metav1.ConditionFalse, fleetv1alpha1.ReasonRolloutComplete, "rollout complete")
	case dep.Status.UpdatedReplicas < desired || dep.Status.Replicas > desired:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonRollingOut, "rolling out the current version",
			metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "rolling out the current version")
	default:
		c.SetReady(metav1.ConditionFalse, fleetv1alpha1.ReasonPodsUnavailable, "waiting for pods to become ready",
			metav1.ConditionTrue, fleetv1alpha1.ReasonRollingOut, "waiting for pods to become ready")
	}
	return st
}
