package common

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/failure"
)

// errBlocked is a missing input or a spec the renderer refuses: the object cannot be
// reconciled until it changes. Result requeues it with backoff; the watches on what
// it reads (index.go) usually wake it sooner.
type errBlocked struct{ reason, message string }

func (e *errBlocked) Error() string { return e.message }

// Blocked is the error of a pass that cannot go on until an input appears or changes;
// reason is the Ready condition's reason (e.g. ReferenceNotFound, InvalidSpec).
func Blocked(reason, message string) error {
	return &errBlocked{reason: reason, message: message}
}

// BlockedReason returns the reason and message of a Blocked error in err's chain.
func BlockedReason(err error) (reason, message string, ok bool) {
	var blocked *errBlocked
	if !errors.As(err, &blocked) {
		return "", "", false
	}
	return blocked.reason, blocked.message, true
}

// Conditions sets conditions of one object at one generation.
type Conditions struct {
	List       *[]metav1.Condition
	Generation int64
}

// Set sets condition t (the transition time changes only when the status does).
func (c Conditions) Set(t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(c.List, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.Generation})
}

// SetReady sets Ready and Progressing together, as every kind reports a rollout.
func (c Conditions) SetReady(ready metav1.ConditionStatus, reason, msg string, progressing metav1.ConditionStatus, progReason, progMsg string) {
	c.Set(fleetv1alpha1.ConditionReady, ready, reason, msg)
	c.Set(fleetv1alpha1.ConditionProgressing, progressing, progReason, progMsg)
}

// SetPassConditions sets what every kind's status shares: Degraded (and lastFailure,
// kept once set) from the pods as they are now and logged, the newest failure read from
// their logs (LogScanner; nil when none), as failure.Merge settles them; and, when the
// pass failed, Ready and Progressing from its error — a missing input (Blocked) with its
// own reason, any other error as ReconcileError. It reports whether the pass failed, in
// which case the caller leaves observedGeneration and the observed fields as they were.
func SetPassConditions(conds *[]metav1.Condition, lastFailure **fleetv1alpha1.FailureStatus, gen int64, pods []corev1.Pod, logged *failure.Failure, err error) (failed bool) {
	f, last := failure.Merge(pods, *lastFailure, logged)
	*lastFailure = last
	meta.SetStatusCondition(conds, f.Condition(gen))
	c := Conditions{List: conds, Generation: gen}
	if reason, msg, ok := BlockedReason(err); ok {
		c.SetReady(metav1.ConditionFalse, reason, msg, metav1.ConditionFalse, reason, "waiting for the missing input")
		return true
	}
	if err != nil {
		c.Set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonReconcileError, err.Error())
		return true
	}
	return false
}

// Bounds of the requeue of a blocked pass.
const (
	minBlockedRequeue = time.Second
	maxBlockedRequeue = 5 * time.Minute
)

// Backoff ends the passes of one reconciler: a blocked pass of an object is requeued
// after a delay that doubles with each blocked pass in a row (1 s up to 5 min); a watch
// on the missing object usually wakes it first. The zero value is not usable: use
// NewBackoff.
type Backoff struct {
	rl workqueue.TypedRateLimiter[types.NamespacedName]
}

// NewBackoff returns a Backoff with no object blocked.
func NewBackoff() *Backoff {
	return &Backoff{rl: workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](minBlockedRequeue, maxBlockedRequeue)}
}

// Result ends the Reconcile of key after the status was written: a blocked pass is
// requeued with backoff, any other error is returned (controller-runtime retries it
// with its own backoff), and a pass that was not blocked resets key's backoff.
func (b *Backoff) Result(ctx context.Context, key types.NamespacedName, err error) (ctrl.Result, error) {
	reason, msg, ok := BlockedReason(err)
	if !ok {
		b.rl.Forget(key)
		return ctrl.Result{}, err
	}
	wait := b.rl.When(key)
	log.FromContext(ctx).Info("blocked; retrying when what it waits for changes, or after the backoff",
		"reason", reason, "message", msg, "requeueAfter", wait.String())
	return ctrl.Result{RequeueAfter: wait}, nil
}
