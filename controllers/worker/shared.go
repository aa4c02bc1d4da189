package worker

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// reconcileShared checks that Shared user Worker w's code resolves as its dispatch
// Workers' sidecars will read it (render.SharedLoaderCode); it has no children: those
// pods load it as an isolate on its first call (docs/dispatch.md). It returns the
// code's ID.
func (r *Reconciler) reconcileShared(ctx context.Context, w *fleetv1alpha1.Worker) (string, error) {
	var cm *corev1.ConfigMap
	if src := w.Spec.Source.ConfigMap; src != nil {
		cm = &corev1.ConfigMap{}
		if err := r.Refs.Live.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: src.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return "", common.Blocked(fleetv1alpha1.ReasonConfigMapNotFound, "spec.source.configMap: ConfigMap "+src.Name+" not found in namespace "+w.Namespace)
			}
			return "", err
		}
	}
	code, err := render.SharedLoaderCode(w, cm)
	if err != nil {
		return "", common.Blocked(fleetv1alpha1.ReasonInvalidSpec, err.Error())
	}
	log.FromContext(ctx).V(1).Info("Shared user Worker: loaded by its dispatch Workers' pods, no pods of its own", "code", code.ID)
	return code.ID, nil
}

// sharedStatus is the status of Shared user Worker w after a pass with error err.
func sharedStatus(w *fleetv1alpha1.Worker, id string, err error) fleetv1alpha1.WorkerStatus {
	st := *w.Status.DeepCopy()
	gen := w.Generation
	if common.SetPassConditions(&st.Conditions, &st.LastFailure, gen, nil, nil, err) {
		return st
	}
	st.ObservedGeneration, st.Version, st.URL = gen, id, ""
	st.Replicas, st.ReadyReplicas = 0, 0
	c := common.Conditions{List: &st.Conditions, Generation: gen}
	c.SetReady(metav1.ConditionTrue, fleetv1alpha1.ReasonShared,
		"runs as an isolate in the pods of dispatch namespace "+w.Spec.DispatchNamespace+"'s dispatch Workers, loaded on its first call",
		metav1.ConditionFalse, fleetv1alpha1.ReasonShared, "nothing to roll out: the next call loads the current code")
	return st
}
