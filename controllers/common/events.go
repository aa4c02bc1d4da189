package common

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// EventRecorderName is the reporting controller of the reconcilers' Events.
const EventRecorderName = "workerd-operator"

// Events records the decisions of a pass a user wants to see as Events on the object,
// each with a log line (log.FromContext: the object's key). A nil Recorder logs only.
type Events struct {
	Recorder events.EventRecorder
}

// Event records one decision: an Event of type (corev1.EventTypeNormal or Warning)
// with reason, action and message, and the same as a log line.
func (e Events) Event(ctx context.Context, obj runtime.Object, eventType, reason, action, msg string) {
	e.EventRelated(ctx, obj, nil, eventType, reason, action, msg)
}

// EventRelated is Event about obj and a related object (nil: none). The recorder folds
// repeats of an Event into a series by type, reason, action and both objects, not by
// message: the related object keeps the Events about two pods of one store apart.
func (e Events) EventRelated(ctx context.Context, obj, related runtime.Object, eventType, reason, action, msg string) {
	log.FromContext(ctx).Info(msg, "event", reason, "action", action, "type", eventType)
	if e.Recorder != nil {
		e.Recorder.Eventf(obj, related, eventType, reason, action, "%s", msg)
	}
}

// Applied records that a new version of the object's pods was applied: its workload
// rolls from version from (empty: none yet) to version to.
func (e Events) Applied(ctx context.Context, obj runtime.Object, from, to string) {
	if from == to || to == "" {
		return
	}
	msg := "applied version " + to + ": rolling out"
	if from == "" {
		msg = "applied the first version " + to
	}
	e.Event(ctx, obj, corev1.EventTypeNormal, "Applied", "Apply", msg)
}

// Transitions records what changed between the conditions before and after a pass:
// Ready turned False on a missing input or a refused spec (blocked) or on an error,
// Ready turned True (rolled out, or recovered), Degraded turned True or names another
// failure (a new one read from the logs), or turned back False.
func (e Events) Transitions(ctx context.Context, obj runtime.Object, before, after []metav1.Condition) {
	was := meta.FindStatusCondition(before, fleetv1alpha1.ConditionReady)
	now := meta.FindStatusCondition(after, fleetv1alpha1.ConditionReady)
	if now != nil && changed(was, now) {
		switch {
		case now.Status == metav1.ConditionTrue:
			e.Event(ctx, obj, corev1.EventTypeNormal, "Ready", "Reconcile", now.Message)
		case blockedReasons[now.Reason]:
			e.Event(ctx, obj, corev1.EventTypeWarning, now.Reason, "Wait", "blocked: "+now.Message)
		case now.Reason == fleetv1alpha1.ReasonReconcileError:
			e.Event(ctx, obj, corev1.EventTypeWarning, now.Reason, "Reconcile", now.Message)
		}
	}
	wasDeg := meta.FindStatusCondition(before, fleetv1alpha1.ConditionDegraded)
	deg := meta.FindStatusCondition(after, fleetv1alpha1.ConditionDegraded)
	switch {
	case deg == nil:
	case deg.Status == metav1.ConditionTrue && changed(wasDeg, deg):
		e.Event(ctx, obj, corev1.EventTypeWarning, deg.Reason, "Degraded", deg.Message)
	case deg.Status != metav1.ConditionTrue && wasDeg != nil && wasDeg.Status == metav1.ConditionTrue:
		e.Event(ctx, obj, corev1.EventTypeNormal, "Recovered", "Degraded", "no longer degraded: "+deg.Message)
	}
}

// blockedReasons are the Ready reasons of a pass that waits for an input to appear or
// change (or, for ChildConflict, for a foreign object to go away).
var blockedReasons = map[string]bool{
	fleetv1alpha1.ReasonReferenceNotFound: true,
	fleetv1alpha1.ReasonConfigMapNotFound: true,
	fleetv1alpha1.ReasonSecretNotFound:    true,
	fleetv1alpha1.ReasonInvalidSpec:       true,
	fleetv1alpha1.ReasonChildConflict:     true,
}

// changed reports whether condition now differs from was in status, reason or message.
func changed(was, now *metav1.Condition) bool {
	return was == nil || was.Status != now.Status || was.Reason != now.Reason || was.Message != now.Message
}
