package failure

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

func terminated(code int32, reason, msg string, at time.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg, FinishedAt: metav1.NewTime(at)}
}

// TestClassifyPod: container states as the kubelet reports them; texts from
// workerd-facts.md §6.
func TestClassifyPod(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	startup := "service main: Uncaught Error: startup kaboom\n  at main.js:1:7\n"
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		want      Cause // "" = nil
		container string
		exit      int32
	}{
		{"nil pod", nil, "", "", 0},
		{"running and ready", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}}}, "", "", 0},
		{"recovered: running and ready after an OOM kill", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: terminated(137, "OOMKilled", "", t0)}},
		}}}, "", "", 0},
		{"completed is not a failure", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", State: corev1.ContainerState{Terminated: terminated(0, "Completed", "", t0)}},
		}}}, "", "", 0},
		{"OOMKilled", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", State: corev1.ContainerState{Terminated: terminated(137, "OOMKilled", "", t0)}},
		}}}, CauseOOM, "workerd", 137},
		{"crash loop on a startup error", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "workerd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: corev1.ContainerState{Terminated: terminated(1, "Error", startup, t0)}},
		}}}, CauseStartupError, "workerd", 1},
		{"restarted but not ready yet", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: terminated(1, "Error", startup, t0)}},
		}}}, CauseStartupError, "workerd", 1},
		{"most recent termination wins", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Terminated: terminated(2, "Error", "", t0)}},
			{Name: "workerd", State: corev1.ContainerState{Terminated: terminated(137, "OOMKilled", "", t0.Add(time.Minute))}},
		}}}, CauseOOM, "workerd", 137},
		{"same time: a named cause beats unknown", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Terminated: terminated(2, "Error", "", t0)}},
			{Name: "workerd", State: corev1.ContainerState{Terminated: terminated(1, "Error", "service main: Worker must specify compatibilityDate.", t0)}},
		}}}, CauseConfigError, "workerd", 1},
		{"init container failure", &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "init", State: corev1.ContainerState{Terminated: terminated(1, "Error", "config.capnp:2:1: Parse error.", t0)}},
		}}}, CauseConfigError, "init", 1},
		{"pod being deleted (rollout kill after grace period)", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: t0}}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", State: corev1.ContainerState{Terminated: terminated(137, "Error", "", t0)}},
		}}}, "", "", 0},
		{"evicted pod without container states", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}}, CauseHardEvict, "", 0},
		{"evicted pod with a killed container", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", ContainerStatuses: []corev1.ContainerStatus{
			{Name: "workerd", State: corev1.ContainerState{Terminated: terminated(137, "Error", "", t0)}},
		}}}, CauseHardEvict, "workerd", 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pod != nil {
				tc.pod.Name = "w-0"
			}
			f := ClassifyPod(tc.pod)
			if tc.want == "" {
				if f != nil {
					t.Fatalf("got %+v, want nil", f)
				}
				if f.Status() != nil {
					t.Fatal("nil Failure gives a non-nil status")
				}
				return
			}
			if f == nil {
				t.Fatalf("got nil, want %s", tc.want)
			}
			if f.Cause != tc.want || f.Container != tc.container || f.ExitCode != tc.exit || f.Pod != "w-0" || f.Message == "" {
				t.Errorf("got %+v, want cause %s container %q exit %d pod w-0 and evidence", f, tc.want, tc.container, tc.exit)
			}
			s := f.Status()
			if s.Cause != string(tc.want) || s.Container != tc.container || s.Pod != "w-0" || s.ExitCode == nil || *s.ExitCode != tc.exit || s.Message != f.Message {
				t.Errorf("Status() = %+v", s)
			}
		})
	}
}

// TestCondition: the Degraded condition the controllers set (api/v1alpha1 constants).
func TestCondition(t *testing.T) {
	healthy := (*Failure)(nil).Condition(4)
	if healthy.Type != fleetv1.ConditionDegraded || healthy.Status != metav1.ConditionFalse || healthy.Reason != fleetv1.ReasonHealthy || healthy.ObservedGeneration != 4 {
		t.Errorf("nil Failure: %+v", healthy)
	}
	f := &Failure{Cause: CauseOOM, Message: "container reason OOMKilled, exit code 137 (cgroup memory limit)", Pod: "w-0", Container: "workerd", ExitCode: 137, Reason: "OOMKilled"}
	c := f.Condition(5)
	want := "pod w-0 container workerd terminated (exit code 137, reason OOMKilled): container reason OOMKilled, exit code 137 (cgroup memory limit)"
	if c.Status != metav1.ConditionTrue || c.Reason != string(CauseOOM) || c.Message != want || c.ObservedGeneration != 5 {
		t.Errorf("got %+v, want reason %s message %q", c, CauseOOM, want)
	}
}

func TestClassifyPods(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	pod := func(name string, term *corev1.ContainerStateTerminated) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if term == nil {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "workerd", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		} else {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "workerd", State: corev1.ContainerState{Terminated: term}}}
		}
		return p
	}
	if f := ClassifyPods([]corev1.Pod{pod("a", nil), pod("b", nil)}); f != nil {
		t.Fatalf("healthy pods: %+v", f)
	}
	f := ClassifyPods([]corev1.Pod{
		pod("a", terminated(1, "Error", "service main: Uncaught Error: startup kaboom", t0)),
		pod("b", nil),
		pod("c", terminated(137, "OOMKilled", "", t0.Add(time.Second))),
	})
	if f == nil || f.Pod != "c" || f.Cause != CauseOOM {
		t.Fatalf("got %+v, want the newest failure: pod c, oom", f)
	}
}
