package common

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ListPods lists the pods in namespace carrying every label of selector.
func ListPods(ctx context.Context, c client.Reader, namespace string, selector map[string]string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(selector)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PodReady reports whether p's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ReadyPods are the pods of pods that can take a call: Ready, with an IP, not being
// deleted; sorted by name.
func ReadyPods(pods []corev1.Pod) []*corev1.Pod {
	var ready []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && PodReady(p) {
			ready = append(ready, p)
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].Name < ready[j].Name })
	return ready
}
