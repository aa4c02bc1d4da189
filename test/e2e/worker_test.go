package e2e

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// newWorker creates a Worker whose module answers with body.
func newWorker(t *testing.T, name, body string, replicas int32) *fleetv1alpha1.Worker {
	t.Helper()
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: name},
		Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			Replicas:          ptr.To(replicas),
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(module(body)),
			}}}},
		},
	}
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	return w
}

func module(body string) string {
	return fmt.Sprintf("export default { fetch() { return new Response(%q) } }", body)
}

// waitWorkerReady waits for Ready=True at the current generation.
func waitWorkerReady(t testing.TB, name string) *fleetv1alpha1.Worker {
	t.Helper()
	w := &fleetv1alpha1.Worker{}
	eventually(t, 3*time.Minute, "Worker "+name+" Ready", func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: name}, w); err != nil {
			return err
		}
		c := meta.FindStatusCondition(w.Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || w.Status.ObservedGeneration != w.Generation {
			return fmt.Errorf("Ready %+v (generation %d, observed %d)", c, w.Generation, w.Status.ObservedGeneration)
		}
		return nil
	})
	return w
}

func workerPods(t testing.TB, name string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(sampleNS),
		client.MatchingLabels{podcontract.LabelWorker: name, podcontract.LabelComponent: podcontract.ComponentWorker}); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

func serviceURL(t testing.TB, name string) string {
	t.Helper()
	var url string
	eventually(t, time.Minute, "service URL of "+name, func() (err error) {
		url, err = cluster.ServiceURL(context.Background(), sampleNS, name, 0)
		return err
	})
	return url
}

// TestSampleWorkerServes is Done means 1 of issue 10: the plain sample answers curl,
// `kubectl get workerd -A` lists it with its printer columns, and `kubectl logs` shows
// workerd's structured logs.
func TestSampleWorkerServes(t *testing.T) {
	url := serviceURL(t, "hello")
	var body string
	eventually(t, time.Minute, "GET hello", func() (err error) {
		body, err = get(url + "/e2e")
		return err
	})
	if want := "Hello from workerd-operator! You asked for /e2e"; !strings.Contains(body, want) {
		t.Errorf("body %q, want %q (the sample's GREETING binding)", body, want)
	}
	settings, err := get(url + "/settings")
	if err != nil || !strings.Contains(settings, `"region":"local"`) {
		t.Errorf("GET /settings = %q, %v: want the sample's JSON binding", settings, err)
	}

	t.Run("kubectl get workerd -A", func(t *testing.T) {
		dir, err := testenv.ControlPlaneDir("kubectl")
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(dir, "kubectl"), "--kubeconfig", cluster.Kubeconfig(), "get", "workerd", "-A").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl: %v\n%s", err, out)
		}
		// One table per kind; the Workers' table is the one whose rows name workers.
		var header string
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for i, l := range lines {
			if strings.Contains(l, "worker.fleet.workerd-operator.io/") && i > 0 {
				for j := i - 1; j >= 0; j-- {
					if strings.HasPrefix(lines[j], "NAMESPACE") {
						header = lines[j]
						break
					}
				}
				break
			}
		}
		for _, col := range []string{"READY", "REPLICAS", "VERSION", "URL"} {
			if !strings.Contains(header, col) {
				t.Errorf("Worker table header %q lacks printer column %s:\n%s", header, col, out)
			}
		}
		if !strings.Contains(string(out), "worker.fleet.workerd-operator.io/hello") || !strings.Contains(string(out), "True") {
			t.Errorf("kubectl get workerd -A does not list the ready hello sample:\n%s", out)
		}
	})

	t.Run("kubectl logs shows structured logs", func(t *testing.T) {
		pods := workerPods(t, "hello")
		if len(pods) == 0 {
			t.Fatal("no hello pods")
		}
		// The request above went to one of the pods; look at all of them.
		eventually(t, 30*time.Second, "a structured console line", func() error {
			for _, p := range pods {
				rc, err := cluster.Client().CoreV1().Pods(sampleNS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "workerd"}).Stream(context.Background())
				if err != nil {
					return err
				}
				b, _ := io.ReadAll(rc)
				rc.Close()
				for _, line := range strings.Split(string(b), "\n") {
					// workerd-facts.md §1.7: console lines are JSON with level and message.
					if strings.HasPrefix(line, "{") && strings.Contains(line, `"level":"log"`) && strings.Contains(line, "hello: GET /e2e") {
						return nil
					}
				}
			}
			return fmt.Errorf("no JSON console line for GET /e2e in the workerd logs of %d pods", len(pods))
		})
	})
}

// TestKilledWorkerdRestarts: deleting a workerd process by PID makes the pod restart
// and the Worker recover.
func TestKilledWorkerdRestarts(t *testing.T) {
	newWorker(t, "phoenix", "risen", 1)
	waitWorkerReady(t, "phoenix")
	pod := workerPods(t, "phoenix")[0]
	var pid int
	for _, p := range cluster.PodProcesses(pod.Namespace, pod.Name) {
		if p.Container == "workerd" {
			pid = p.PID
		}
	}
	if pid == 0 {
		t.Fatalf("no workerd process for pod %s", pod.Name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "workerd restarted and ready", func() error {
		p := &corev1.Pod{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(&pod), p); err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "workerd" && cs.RestartCount >= 1 && cs.Ready {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	})
	waitWorkerReady(t, "phoenix")
	url := serviceURL(t, "phoenix")
	eventually(t, time.Minute, "serving again", func() error {
		body, err := get(url)
		if err == nil && body != "risen" {
			return fmt.Errorf("body %q", body)
		}
		return err
	})
}

// TestScaleToThree: scaling a Worker to 3 replicas yields 3 serving workerd processes.
func TestScaleToThree(t *testing.T) {
	w := newWorker(t, "trio", "one of three", 1)
	waitWorkerReady(t, "trio")
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec.Replicas = ptr.To[int32](3)
	if err := k8sClient.Patch(context.Background(), w, patch); err != nil {
		t.Fatal(err)
	}
	w = waitWorkerReady(t, "trio")
	if w.Status.ReadyReplicas != 3 {
		t.Fatalf("readyReplicas %d, want 3", w.Status.ReadyReplicas)
	}
	pods := workerPods(t, "trio")
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	ips := map[string]bool{}
	for _, p := range pods {
		procs := cluster.PodProcesses(p.Namespace, p.Name)
		var workerd bool
		for _, pr := range procs {
			workerd = workerd || pr.Container == "workerd"
		}
		if !workerd {
			t.Errorf("pod %s has no running workerd process", p.Name)
		}
		ips[p.Status.PodIP] = true
		// Each process serves on its own pod address.
		body, err := get(fmt.Sprintf("http://%s:8080/", p.Status.PodIP))
		if err != nil || body != "one of three" {
			t.Errorf("pod %s (%s): %q, %v", p.Name, p.Status.PodIP, body, err)
		}
	}
	if len(ips) != 3 {
		t.Errorf("pod IPs %v: want 3 distinct addresses", ips)
	}
}

// TestRolloutWithoutFailedRequests: changing a module rolls the pods while a client
// polls the Service; no request fails (preStop sleep + readiness + maxUnavailable 0).
func TestRolloutWithoutFailedRequests(t *testing.T) {
	w := newWorker(t, "rolling", "v1", 2)
	waitWorkerReady(t, "rolling")
	url := serviceURL(t, "rolling")
	eventually(t, time.Minute, "v1 served", func() error {
		body, err := get(url)
		if err == nil && body != "v1" {
			return fmt.Errorf("body %q", body)
		}
		return err
	})

	var (
		ok, failed atomic.Int64
		sawV2      atomic.Bool
		mu         sync.Mutex
		failures   []string
		stop       = make(chan struct{})
		done       = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			body, err := get(url)
			switch {
			case err != nil || (body != "v1" && body != "v2"):
				failed.Add(1)
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: %q %v", time.Now().Format(time.RFC3339Nano), body, err))
				mu.Unlock()
			default:
				ok.Add(1)
				if body == "v2" {
					sawV2.Store(true)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	patch := client.MergeFrom(w.DeepCopy())
	w.Spec.Source.Inline.Modules[0].Content = ptr.To(module("v2"))
	if err := k8sClient.Patch(context.Background(), w, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "rollout complete", func() error {
		cur := &fleetv1alpha1.Worker{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(w), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, fleetv1alpha1.ConditionReady)
		dep := &appsv1.Deployment{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(w), dep); err != nil {
			return err
		}
		if cur.Status.ObservedGeneration != cur.Generation || c == nil || c.Status != metav1.ConditionTrue || dep.Status.Replicas != 2 {
			return fmt.Errorf("Ready %+v, deployment replicas %d", c, dep.Status.Replicas)
		}
		return nil
	})
	// Old pods are gone only after their preStop and drain (a kept-alive client
	// connection may stay on an old pod until then, at most the grace period of
	// 5 + 120 + 30 s, docs/durable-objects.md "Rollouts"): keep polling through it.
	eventually(t, 4*time.Minute, "old pods gone", func() error {
		pods := &corev1.PodList{}
		if err := k8sClient.List(context.Background(), pods, client.InNamespace(sampleNS),
			client.MatchingLabels{podcontract.LabelWorker: "rolling"}); err != nil {
			return err
		}
		if n := len(pods.Items); n != 2 {
			return fmt.Errorf("%d pods (terminating included)", n)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	close(stop)
	<-done

	if !sawV2.Load() {
		t.Error("the client never saw v2")
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d requests failed during the rollout:\n%s", n, n+ok.Load(), strings.Join(failures, "\n"))
	}
	t.Logf("rollout: %d requests, none failed", ok.Load())
}
