package specs

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// defaultSpread gives pod a spread of its set's pods (those selector selects) over
// nodes, unless the Worker's spec.pod.topologySpreadConstraints already set some: the
// user's list then wins whole, nothing is merged into it. ScheduleAnyway makes the
// spread a preference, so a one-node cluster (or one whose other nodes are full)
// still schedules every pod. matchLabelKeys narrows the counted pods to those with the
// incoming pod's values of these keys.
// https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/
func defaultSpread(pod *corev1.PodSpec, selector map[string]string, matchLabelKeys []string) {
	if len(pod.TopologySpreadConstraints) > 0 {
		return
	}
	pod.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelHostname,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: selector},
		MatchLabelKeys:    slices.Clone(matchLabelKeys),
	}}
}

// Spread keys per kind of set:
//   - A Deployment's rollout surges new pods next to old ones that are about to go;
//     counting only the incoming pod's ReplicaSet (pod-template-hash, the docs'
//     example) spreads the set that remains after the rollout.
//   - A StatefulSet has no surge: it replaces pod i in place (the old one is gone
//     before its successor is created), so during a rollout old- and new-revision
//     pods are the whole set. Keying on controller-revision-hash would count only the
//     already-replaced pods and ignore where the rest run, stacking successors on one
//     node; so every pod of the set counts.
var (
	deploymentSpreadKeys  = []string{appsv1.DefaultDeploymentUniqueLabelKey}
	statefulSetSpreadKeys []string
)

// buildDisruptionBudget is the PodDisruptionBudget of a StatefulSet's pods (selector):
// a voluntary disruption (eviction by a node drain) may take one pod at a time.
// maxUnavailable rather than minAvailable: a one-pod set (a data store, a Workflow
// engine, a one-shard namespace) can still be drained; minAvailable 1 would block the
// drain for good.
// https://kubernetes.io/docs/tasks/run-application/configure-pdb/
func buildDisruptionBudget(meta metav1.ObjectMeta, selector map[string]string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: selector},
			// A pod that is not Ready (a crash-looping shard) may be evicted even when
			// the budget is spent: with IfHealthyBudget (the default) the broken pod
			// spends the budget and may not be evicted itself, so the drain of its node
			// never ends, although evicting it takes down nothing that was serving.
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}
