package failure

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Failure is one classified container failure of a pod.
type Failure struct {
	// Cause is the classified cause; string(Cause) is the Degraded condition's reason.
	Cause Cause
	// Message is the evidence that decided (Diagnose), at most MaxEvidenceBytes bytes.
	Message string
	// Pod and Container name the failed container.
	Pod, Container string
	// ExitCode and Signal are the container's, as reported by the kubelet.
	ExitCode, Signal int32
	// Reason is the container's terminated reason ("OOMKilled", "Error", ...) or, for an
	// evicted pod, "Evicted".
	Reason string
	// Time is when the container terminated (finishedAt); zero when unknown.
	Time metav1.Time
}

// Status converts f into the API's status.lastFailure; nil for a nil f.
func (f *Failure) Status() *fleetv1.FailureStatus {
	if f == nil {
		return nil
	}
	s := &fleetv1.FailureStatus{Cause: string(f.Cause), Message: f.Message, Pod: f.Pod, Container: f.Container}
	code := f.ExitCode
	s.ExitCode = &code
	if !f.Time.IsZero() {
		t := f.Time
		s.Time = &t
	}
	return s
}

// Summary is one line for a condition or Event message: "pod <pod> container
// <container> terminated (exit code <n>[, signal <s>][, reason <r>]): <evidence>".
func (f *Failure) Summary() string {
	if f == nil {
		return ""
	}
	where := "pod " + f.Pod
	if f.Container != "" {
		where += " container " + f.Container
	}
	how := fmt.Sprintf("exit code %d", f.ExitCode)
	if f.Signal != 0 {
		how += fmt.Sprintf(", signal %d", f.Signal)
	}
	if f.Reason != "" {
		how += ", reason " + f.Reason
	}
	return fmt.Sprintf("%s terminated (%s): %s", where, how, f.Message)
}

// Condition is the Degraded condition for f (nil f: Degraded False, reason Healthy),
// to be set with meta.SetStatusCondition (which fills lastTransitionTime).
func (f *Failure) Condition(observedGeneration int64) metav1.Condition {
	if f == nil {
		return metav1.Condition{Type: fleetv1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: fleetv1.ReasonHealthy,
			Message: "no container of the object's pods terminated abnormally", ObservedGeneration: observedGeneration}
	}
	return metav1.Condition{Type: fleetv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: string(f.Cause),
		Message: f.Summary(), ObservedGeneration: observedGeneration}
}

// ClassifyPod returns the most relevant abnormal termination of pod, classified, or nil
// when there is none (nil pod included).
//
// A termination is abnormal when its exit code or signal is not 0 or its reason is
// OOMKilled.
// Each init and app container contributes its current state.terminated and, unless it
// is running and ready again, its lastState.terminated (a crash-looping container is
// waiting with the crash in lastState; one that restarted and is ready is healthy).
// The most recent (finishedAt) wins; on a tie, a cause other than unknown, then the
// earlier container in the pod status. A pod with status.reason Evicted is hard_evict
// even when no container status survived. Only the termination message is available
// here (no log lines): pods use terminationMessagePolicy FallbackToLogsOnError.
//
// A pod being deleted (deletionTimestamp set) gives nil: a rollout or scale-down kills
// containers (SIGKILL after the grace period reads as exit 137), which is not a failure.
func ClassifyPod(pod *corev1.Pod) *Failure {
	if pod == nil || pod.DeletionTimestamp != nil {
		return nil
	}
	var best *Failure
	consider := func(name string, term *corev1.ContainerStateTerminated) {
		if term == nil || (term.ExitCode == 0 && term.Signal == 0 && term.Reason != "OOMKilled") {
			return
		}
		t := Termination{ExitCode: term.ExitCode, Signal: term.Signal, Reason: term.Reason, Message: term.Message, PodReason: pod.Status.Reason}
		c, ev := Diagnose(t)
		f := &Failure{Cause: c, Message: ev, Pod: pod.Name, Container: name, ExitCode: term.ExitCode, Signal: term.Signal, Reason: term.Reason, Time: term.FinishedAt}
		if best == nil || f.Time.After(best.Time.Time) || (f.Time.Equal(&best.Time) && best.Cause == CauseUnknown && f.Cause != CauseUnknown) {
			best = f
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			consider(cs.Name, cs.State.Terminated)
			if !(cs.State.Running != nil && cs.Ready) {
				consider(cs.Name, cs.LastTerminationState.Terminated)
			}
		}
	}
	if best == nil && pod.Status.Reason == "Evicted" {
		c, ev := Diagnose(Termination{PodReason: pod.Status.Reason, Message: pod.Status.Message})
		best = &Failure{Cause: c, Message: ev, Pod: pod.Name, Reason: "Evicted"}
	}
	return best
}

// ClassifyPods is ClassifyPod over an object's pods: the most recent failure (by Time;
// on a tie, a cause other than unknown, then the earlier pod), or nil when every pod is
// healthy or being deleted — the value for status.lastFailure and Degraded.
func ClassifyPods(pods []corev1.Pod) *Failure {
	var best *Failure
	for i := range pods {
		f := ClassifyPod(&pods[i])
		if f == nil {
			continue
		}
		if best == nil || f.Time.After(best.Time.Time) || (f.Time.Equal(&best.Time) && best.Cause == CauseUnknown && f.Cause != CauseUnknown) {
			best = f
		}
	}
	return best
}
