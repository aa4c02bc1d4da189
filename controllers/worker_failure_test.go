package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// workerPod is a pod of the Worker's Deployment as the kubelet would report it; envtest
// has no kubelet, so the test writes the container status itself.
func workerPod(ns, worker, name string, state corev1.ContainerStatus) (*corev1.Pod, corev1.PodStatus) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			podcontract.LabelName: "workerd", podcontract.LabelComponent: podcontract.ComponentWorker, podcontract.LabelWorker: worker,
			// The manager caches only the pods it labels (the pod template's labels).
			podcontract.LabelManagedBy: podcontract.ManagedBy,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "workerd", Image: testOpts.WorkerdImage}}},
	}
	state.Name = "workerd"
	return pod, corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{state}}
}

func createPodWithStatus(t *testing.T, pod *corev1.Pod, st corev1.PodStatus) {
	t.Helper()
	ctx := context.Background()
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = st
	if err := k8sClient.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func TestWorkerDegradedByPodFailures(t *testing.T) {
	finished := metav1.NewTime(time.Now().Truncate(time.Second))
	cases := []struct {
		name    string
		state   corev1.ContainerStatus
		cause   failure.Cause
		message string
	}{
		{
			name: "OOMKilled exit 137",
			state: corev1.ContainerStatus{
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: finished}},
				RestartCount:         3,
			},
			cause: failure.CauseOOM,
		},
		{
			name: "exit 1 with a workerd startup line",
			state: corev1.ContainerStatus{
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: finished,
					// workerd-facts.md §6: the exact startup error of a module that throws.
					Message: "service hello: Uncaught Error: startup kaboom\n  at worker.js:1:7\n"}},
				RestartCount: 2,
			},
			cause:   failure.CauseStartupError,
			message: "startup kaboom",
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			name := fmt.Sprintf("fails-%d", i)
			w := workerFixture(ns, name)
			if err := k8sClient.Create(ctx, w); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKeyFromObject(w)
			pod, st := workerPod(ns, name, name+"-abc", tc.state)
			createPodWithStatus(t, pod, st)

			eventually(t, "Degraded with the classified cause", func() error {
				w := getWorker(t, key)
				c := meta.FindStatusCondition(w.Status.Conditions, fleetv1alpha1.ConditionDegraded)
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(tc.cause) {
					return fmt.Errorf("Degraded %+v", c)
				}
				if w.Status.LastFailure == nil || w.Status.LastFailure.Cause != string(tc.cause) || w.Status.LastFailure.Pod != pod.Name ||
					w.Status.LastFailure.Container != "workerd" || !strings.Contains(w.Status.LastFailure.Message, tc.message) {
					return fmt.Errorf("lastFailure %+v", w.Status.LastFailure)
				}
				return nil
			})
			eventually(t, "a Warning event with the cause", func() error {
				evs := &eventsv1.EventList{}
				if err := k8sClient.List(ctx, evs, client.InNamespace(ns)); err != nil {
					return err
				}
				for _, e := range evs.Items {
					if e.Regarding.Name == name && e.Regarding.Kind == "Worker" && e.Type == corev1.EventTypeWarning && e.Reason == string(tc.cause) {
						return nil
					}
				}
				return fmt.Errorf("no event among %d", len(evs.Items))
			})

			// The pod is replaced by a running, ready one: Degraded clears.
			if err := k8sClient.Delete(ctx, pod); err != nil {
				t.Fatal(err)
			}
			healthy, hst := workerPod(ns, name, name+"-def", corev1.ContainerStatus{
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: finished}}, Ready: true,
			})
			createPodWithStatus(t, healthy, hst)
			eventually(t, "Degraded clears", func() error {
				c := meta.FindStatusCondition(getWorker(t, key).Status.Conditions, fleetv1alpha1.ConditionDegraded)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fleetv1alpha1.ReasonHealthy {
					return fmt.Errorf("Degraded %+v", c)
				}
				return nil
			})
		})
	}
}
