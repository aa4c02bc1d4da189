package controller

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/failure"
)

// setPassConditions sets what every kind's status shares: Degraded (and lastFailure,
// kept once set) from the pods as they are now, and, when the pass failed, Ready and
// Progressing from its error — a missing input (errBlocked) with its own reason, any
// other error as ReconcileError. It reports whether the pass failed, in which case the
// caller leaves observedGeneration and the observed fields as they were.
func setPassConditions(conds *[]metav1.Condition, lastFailure **fleetv1alpha1.FailureStatus, gen int64, pods []corev1.Pod, err error) (failed bool) {
	f := failure.ClassifyPods(pods)
	if f != nil {
		*lastFailure = f.Status()
	}
	meta.SetStatusCondition(conds, f.Condition(gen))
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	var blocked *errBlocked
	switch {
	case errors.As(err, &blocked):
		set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, blocked.reason, blocked.message)
		set(fleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, blocked.reason, "waiting for the missing input")
		return true
	case err != nil:
		set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonReconcileError, err.Error())
		return true
	}
	return false
}

// passResult ends a Reconcile after the status was written: a missing input is logged
// and not retried (the watches on the missing object requeue it); any other error is
// returned so that controller-runtime retries with back-off.
func passResult(ctx context.Context, err error) (ctrl.Result, error) {
	var blocked *errBlocked
	if errors.As(err, &blocked) {
		log.FromContext(ctx).Info("blocked on a missing input", "reason", blocked.reason, "message", blocked.message)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}
