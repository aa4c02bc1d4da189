package failure

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Failure is one classified container failure of a pod: a termination (ClassifyPod) or
// a line of a running container's log (ClassifyLog, Logged).
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
	// Time is when the container terminated (finishedAt) or logged the line; zero when
	// unknown.
	Time metav1.Time
	// Logged: read from the log of a container that runs on; it has no exit code.
	Logged bool
}

// Status converts f into the API's status.lastFailure; nil for a nil f.
func (f *Failure) Status() *fleetv1.FailureStatus {
	if f == nil {
		return nil
	}
	s := &fleetv1.FailureStatus{Cause: string(f.Cause), Message: f.Message, Pod: f.Pod, Container: f.Container}
	if !f.Logged {
		code := f.ExitCode
		s.ExitCode = &code
	}
	if !f.Time.IsZero() {
		t := f.Time
		s.Time = &t
	}
	return s
}

// Summary is one line for a condition or Event message: "pod <pod> container
// <container> terminated (exit code <n>[, signal <s>][, reason <r>]): <evidence>", or
// for a logged failure "pod <pod> container <container> logged at <time>: <evidence>".
func (f *Failure) Summary() string {
	if f == nil {
		return ""
	}
	where := "pod " + f.Pod
	if f.Container != "" {
		where += " container " + f.Container
	}
	if f.Logged {
		return fmt.Sprintf("%s logged at %s: %s", where, f.Time.UTC().Format(time.RFC3339), f.Message)
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

// Merge settles a pass over an object's pods: the failure that makes it Degraded now
// (nil: healthy) and the new status.lastFailure. terms are the pods' terminations
// (ClassifyPods), logged is the newest failure read from their logs (ClassifyLog; nil
// when none), recorded the status's lastFailure so far.
//
// lastFailure is the last failure, not the current one: a termination or a logged line
// replaces it unless it is older (by Time, at the API's second precision; a failure of
// unknown time replaces it). The object is Degraded by the newer of the terminations
// shown now and a logged failure whose container still runs: the same pod, its
// container running since before the line. A logged failure thus stays until something
// newer happens or its pod is replaced (a rollout, e.g. after the fix) or its container
// restarts; a pass that reads no new line changes nothing.
func Merge(pods []corev1.Pod, recorded *fleetv1.FailureStatus, logged *Failure) (*Failure, *fleetv1.FailureStatus) {
	term := ClassifyPods(pods)
	last := recorded
	first, second := term, logged
	if first != nil && second != nil && second.Time.Before(&first.Time) {
		first, second = second, first
	}
	for _, f := range []*Failure{first, second} {
		if f != nil && !olderThan(f, last) {
			last = f.Status()
		}
	}
	var live *Failure
	if logged != nil && !olderThan(logged, recorded) && stillRuns(pods, logged) {
		live = logged
	} else if rec := fromStatus(recorded); rec != nil && rec.Logged && stillRuns(pods, rec) {
		live = rec
	}
	if term == nil || (live != nil && live.Time.After(term.Time.Time)) {
		return live, last
	}
	return term, last
}

// olderThan reports whether f happened before rec, both times known, at the second
// precision the API stores.
func olderThan(f *Failure, rec *fleetv1.FailureStatus) bool {
	if rec == nil || rec.Time == nil || f.Time.IsZero() {
		return false
	}
	return f.Time.Truncate(time.Second).Before(rec.Time.Truncate(time.Second))
}

// stillRuns reports whether the container that logged f is the one running now: its
// pod is there and not being deleted, the container runs and started no later than f.
func stillRuns(pods []corev1.Pod, f *Failure) bool {
	for i := range pods {
		p := &pods[i]
		if p.Name != f.Pod || p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == f.Container && cs.State.Running != nil {
				return !cs.State.Running.StartedAt.Truncate(time.Second).After(f.Time.Truncate(time.Second))
			}
		}
	}
	return false
}

// fromStatus is the Failure a status.lastFailure records (Logged when it has no exit
// code: only a logged failure lacks one); nil for nil.
func fromStatus(s *fleetv1.FailureStatus) *Failure {
	if s == nil {
		return nil
	}
	f := &Failure{Cause: Cause(s.Cause), Message: s.Message, Pod: s.Pod, Container: s.Container, Logged: s.ExitCode == nil}
	if s.ExitCode != nil {
		f.ExitCode = *s.ExitCode
	}
	if s.Time != nil {
		f.Time = *s.Time
	}
	return f
}
