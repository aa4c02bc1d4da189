package devcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// workerdImage is the image the pod contract names for workerd; config/dev/images.yaml
// maps it to the pinned binary.
var workerdImage = "ghcr.io/workerd-operator/workerd:" + testenv.WorkerdVersion

// shImage stands for /bin/sh in the tests' image mapping.
const shImage = "example.test/sh:1"

var cluster *Cluster

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	images, err := LoadImageMapping(filepath.Join(root, "config", "dev", "images.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	images.Images = append(images.Images, ImageBinary{Image: "example.test/sh", Binary: "/bin/sh"})
	dir, err := os.MkdirTemp("", "devcluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cluster, err = Start(ctx, Config{Dir: dir, Images: images, Log: os.Stderr, ControlPlaneDir: os.Getenv("DEVCLUSTER_CONTROL_PLANE_DIR")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devcluster: start:", err)
		return 1
	}
	code := m.Run()
	cluster.Stop()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "devcluster: state kept in", dir)
	}
	return code
}

// eventually polls cond every 200ms until it holds or a generous bound passes (the bound
// only stops a hung test; nothing is asserted about timing).
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: never happened; last state: %s", what, last)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// logsSince: through the API server, timestamps=true prefixes each line with its time,
// and sinceTime (whole seconds on the wire) leaves out the lines before it.
func logsSince(t *testing.T, p corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	logs := func(o *corev1.PodLogOptions) string {
		o.Container = "workerd"
		b, err := cluster.Client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, o).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var first time.Time
	for _, line := range strings.Split(logs(&corev1.PodLogOptions{Timestamps: true}), "\n") {
		ts, text, _ := strings.Cut(line, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if line != "" && err != nil {
			t.Fatalf("line %q does not start with its time", line)
		}
		if strings.Contains(text, "devcluster-test GET /direct") {
			first = at
		}
	}
	if first.IsZero() {
		t.Fatal("no timestamped line of the first request")
	}
	since := metav1.NewTime(first.Truncate(time.Second).Add(time.Second))
	for time.Now().Before(since.Time) {
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := get("http://" + p.Status.PodIP + ":8080/later"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "sinceTime leaves out the first request and shows the later one", func() (bool, string) {
		got := logs(&corev1.PodLogOptions{SinceTime: &since})
		return !strings.Contains(got, "GET /direct") && strings.Contains(got, "GET /later"), got
	})
}

func get(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	r, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return r.StatusCode, string(b), err
}

// TestWorkerdDeployment runs the pinned workerd as a 2-replica Deployment from a
// ConfigMap and checks readiness, addresses, the Service URL, logs, restarts after a
// kill and DNS names.
func TestWorkerdDeployment(t *testing.T) {
	ctx := context.Background()
	cli := cluster.Client()
	ns := "default"
	body := readTestdata(t, "body.txt")
	_, err := cli.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "web-config"},
		Data: map[string]string{
			"config.capnp": readTestdata(t, "config.capnp"),
			"worker.js":    readTestdata(t, "worker.js"),
			"body.txt":     body,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	replicas := int32(2)
	_, err = cli.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "workerd",
						Image: workerdImage,
						Args:  []string{"serve", "/etc/workerd/config.capnp", "--socket-addr=http=$(POD_IP):8080"},
						Env:   []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
							PeriodSeconds: 1,
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/workerd"}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var pods []corev1.Pod
	eventually(t, "2 workerd pods Ready", func() (bool, string) {
		l, err := cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		pods = nil
		for _, p := range l.Items {
			if podReady(&p) && p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
		return len(pods) == 2, fmt.Sprintf("%d pods, %d ready: %+v", len(l.Items), len(pods), l.Items)
	})
	if pods[0].Status.PodIP == pods[1].Status.PodIP || !strings.HasPrefix(pods[0].Status.PodIP, "127.") || !strings.HasPrefix(pods[1].Status.PodIP, "127.") {
		t.Fatalf("pod IPs %q and %q: want two distinct addresses in 127.0.0.0/8", pods[0].Status.PodIP, pods[1].Status.PodIP)
	}

	url, err := cluster.ServiceURL(ctx, ns, "web", 8080)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service URL answers with the worker's body", func() (bool, string) {
		code, got, err := get(url + "/hello")
		return err == nil && code == 200 && got == body, fmt.Sprintf("%d %q %v", code, got, err)
	})

	t.Run("logs", func(t *testing.T) {
		for _, p := range pods {
			if _, _, err := get("http://" + p.Status.PodIP + ":8080/direct"); err != nil {
				t.Fatal(err)
			}
			eventually(t, "kubectl logs shows the request", func() (bool, string) {
				b, err := cli.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "workerd"}).DoRaw(ctx)
				return err == nil && strings.Contains(string(b), "devcluster-test GET /direct"), fmt.Sprintf("%q %v", b, err)
			})
		}
		logsSince(t, pods[0])
	})

	t.Run("restart after kill", func(t *testing.T) {
		p := pods[0]
		procs := cluster.PodProcesses(ns, p.Name)
		if len(procs) != 1 {
			t.Fatalf("pod %s: %d processes, want 1", p.Name, len(procs))
		}
		if err := syscall.Kill(procs[0].PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, "restartCount 1 and Ready again", func() (bool, string) {
			cur, err := cli.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			cs := cur.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].RestartCount == 1 && podReady(cur), fmt.Sprintf("%+v", cur.Status)
		})
		cur, _ := cli.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		last := cur.Status.ContainerStatuses[0].LastTerminationState.Terminated
		if last == nil || last.ExitCode != 128+int32(syscall.SIGKILL) {
			t.Errorf("last termination %+v: want exit code %d (SIGKILL)", last, 128+int32(syscall.SIGKILL))
		}
		eventually(t, "the pod serves again", func() (bool, string) {
			code, got, err := get("http://" + p.Status.PodIP + ":8080/again")
			return err == nil && code == 200 && got == body, fmt.Sprintf("%d %q %v", code, got, err)
		})
	})

	t.Run("dns", func(t *testing.T) {
		svc, err := cli.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		name := "web." + ns + ".svc." + ClusterDomain
		pod := shPod("resolver", corev1.RestartPolicyNever, "getent hosts "+name+"; echo done")
		if _, err := cli.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the resolver pod prints the Service's ClusterIP", func() (bool, string) {
			b, err := cli.CoreV1().Pods(ns).GetLogs("resolver", &corev1.PodLogOptions{}).DoRaw(ctx)
			return err == nil && strings.Contains(string(b), svc.Spec.ClusterIP+" ") && strings.Contains(string(b), name), fmt.Sprintf("want %s %s in %q %v", svc.Spec.ClusterIP, name, b, err)
		})
	})
}

func shPod(name string, restart corev1.RestartPolicy, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			Containers:    []corev1.Container{{Name: "sh", Image: shImage, Args: []string{"-c", script}}},
		},
	}
}

// TestDeleteSendsSIGTERM deletes a pod whose process exits 42 on SIGTERM and checks the
// recorded exit code.
func TestDeleteSendsSIGTERM(t *testing.T) {
	ctx := context.Background()
	cli := cluster.Client()
	ns := "default"
	const exitOnTerm = 42
	pod := shPod("term", corev1.RestartPolicyAlways, fmt.Sprintf("trap 'echo got TERM; exit %d' TERM; echo started; while true; do sleep 0.1; done", exitOnTerm))
	grace := int64(20)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	if _, err := cli.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod Ready and started", func() (bool, string) {
		p, err := cli.CoreV1().Pods(ns).Get(ctx, "term", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		b, _ := cli.CoreV1().Pods(ns).GetLogs("term", &corev1.PodLogOptions{}).DoRaw(ctx)
		return podReady(p) && strings.Contains(string(b), "started"), fmt.Sprintf("%+v", p.Status)
	})
	w, err := cli.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=term"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := cli.CoreV1().Pods(ns).Delete(ctx, "term", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var term *corev1.ContainerStateTerminated
	timeout := time.After(3 * time.Minute)
	for term == nil {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				if ev.Type == watch.Deleted && term == nil {
					t.Fatalf("pod deleted without a terminated container status")
				}
				continue
			}
			if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
				term = cs[0].State.Terminated
			}
		case <-timeout:
			t.Fatal("no terminated status seen")
		}
	}
	if term.ExitCode != exitOnTerm {
		t.Errorf("exit code %d (%s), want %d from the SIGTERM trap", term.ExitCode, term.Reason, exitOnTerm)
	}
}

// TestPersistentVolumeClaim binds a claim through the provisioner and writes into it.
func TestPersistentVolumeClaim(t *testing.T) {
	ctx := context.Background()
	cli := cluster.Client()
	ns := "default"
	_, err := cli.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := shPod("writer", corev1.RestartPolicyNever, `echo written > "$OUT"`)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OUT", Value: "/data/file.txt"}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	if _, err := cli.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pvc *corev1.PersistentVolumeClaim
	eventually(t, "claim Bound", func() (bool, string) {
		pvc, err = cli.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, fmt.Sprintf("%+v %v", pvc, err)
	})
	pv, err := cli.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, filepath.Join(cluster.Dir(), "volumes")) {
		t.Fatalf("PV source %+v: want a hostPath under %s", pv.Spec.PersistentVolumeSource, filepath.Join(cluster.Dir(), "volumes"))
	}
	eventually(t, "writer Succeeded", func() (bool, string) {
		p, err := cli.CoreV1().Pods(ns).Get(ctx, "writer", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("%+v %v", p, err)
	})
	b, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "file.txt"))
	if err != nil || string(b) != "written\n" {
		t.Fatalf("claim directory file: %q %v, want %q", b, err, "written\n")
	}
}

// TestUnknownImage checks the clear status message for an unmapped image.
func TestUnknownImage(t *testing.T) {
	ctx := context.Background()
	cli := cluster.Client()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unknown-image"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "example.test/not-mapped:1"}}}}
	if _, err := cli.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "waiting reason ErrImageNeverPull naming the image", func() (bool, string) {
		p, err := cli.CoreV1().Pods("default").Get(ctx, "unknown-image", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false, fmt.Sprintf("%+v %v", p, err)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w.Reason == "ErrImageNeverPull" && strings.Contains(w.Message, "example.test/not-mapped:1") && strings.Contains(w.Message, "images.yaml"), fmt.Sprintf("%+v", w)
	})
}

// TestSameNameReplacement deletes both pods of a 2-replica StatefulSet at once, several
// rounds, and waits for both replacements (same names, new UIDs) to be Ready. The rows
// vary how the old pod stops, which decides whether virtual-kubelet hands the provider
// the replacement while the old pod's processes are still stopping:
//   - a native sidecar that takes a few seconds after SIGTERM (old run gone well before
//     virtual-kubelet removes the pod object, at the end of the grace period);
//   - a main container that ignores SIGTERM (killed at the grace deadline) and a sidecar
//     that then takes 2 s more: virtual-kubelet deletes the pod object at the grace
//     deadline, so the StatefulSet creates the replacement while the old run still
//     holds the name. Before the fix the replacement stayed Pending for good:
//     virtual-kubelet's GetPod found the old run under the name, compared it (no UID in
//     the comparison) equal to the replacement and never called CreatePod;
//   - a forced delete (grace 0): the pod object is gone at once, the old processes run
//     on until the provider is told; same outcome before the fix;
//   - deleting again while the replacements start (before they are Ready).
func TestSameNameReplacement(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	type row struct {
		name          string
		mainScript    string
		sidecarScript string
		grace         int64
		deleteGrace   *int64 // DeleteOptions.GracePeriodSeconds; nil: the pod's
		duringStartup bool   // delete the replacements again before they are Ready
	}
	zero := int64(0)
	rows := []row{
		{name: "slow-sidecar", grace: 10,
			mainScript:    "trap 'exit 0' TERM; while true; do sleep 0.1; done",
			sidecarScript: "trap 'sleep 3; exit 0' TERM; while true; do sleep 0.1; done"},
		{name: "outlives-grace", grace: 2,
			mainScript:    "trap '' TERM; while true; do sleep 0.1; done",
			sidecarScript: "trap 'sleep 5; exit 0' TERM; while true; do sleep 0.1; done"},
		{name: "force-delete", grace: 10, deleteGrace: &zero,
			mainScript:    "trap 'exit 0' TERM; while true; do sleep 0.1; done",
			sidecarScript: "trap 'exit 0' TERM; while true; do sleep 0.1; done"},
		{name: "during-startup", grace: 2, duringStartup: true,
			mainScript:    "trap '' TERM; sleep 1; while true; do sleep 0.1; done",
			sidecarScript: "trap 'sleep 5; exit 0' TERM; while true; do sleep 0.1; done"},
	}
	const rounds = 3
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cli := cluster.Client()
			ns := "default"
			name := "same-" + tc.name
			labels := map[string]string{"app": name}
			tmpl := shPod("", corev1.RestartPolicyAlways, tc.mainScript)
			tmpl.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: shImage, RestartPolicy: &always,
				Args: []string{"-c", tc.sidecarScript}}}
			tmpl.Spec.TerminationGracePeriodSeconds = &tc.grace
			// As the operator's Worker and shard pods: no service account token. With
			// one, every pod gets a volume mount with a random name (kube-api-access-…),
			// so a replacement never compares equal to the pod it replaces and
			// virtual-kubelet calls UpdatePod; without one it is identical but for its UID.
			tmpl.Spec.AutomountServiceAccountToken = new(bool)
			two := int32(2)
			_, err := cli.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: appsv1.StatefulSetSpec{
					Replicas: &two, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
					PodManagementPolicy: appsv1.ParallelPodManagement,
					Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cli.AppsV1().StatefulSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
			pods := []string{name + "-0", name + "-1"}
			// state reports the pod, its events and the provider's run for the name.
			state := func(pod string) string {
				p, err := cli.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
				if err != nil {
					return fmt.Sprintf("%s: %v; provider: %s", pod, err, cluster.PodRunInfo(ns, pod))
				}
				return fmt.Sprintf("%s uid %s phase %s conditions %+v; provider: %s", pod, p.UID, p.Status.Phase, p.Status.Conditions, cluster.PodRunInfo(ns, pod))
			}
			uids := map[string]types.UID{}
			waitReplaced := func(what string) {
				t.Helper()
				for _, pod := range pods {
					eventually(t, pod+" "+what, func() (bool, string) {
						p, err := cli.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
						if err != nil {
							return false, state(pod)
						}
						if p.UID == uids[pod] || !podReady(p) {
							return false, state(pod)
						}
						uids[pod] = p.UID
						return true, ""
					})
				}
			}
			del := func(pod string, uid types.UID) {
				t.Helper()
				err := cli.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: tc.deleteGrace, Preconditions: &metav1.Preconditions{UID: &uid}})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					t.Fatal(err)
				}
			}
			waitReplaced("Ready")
			for round := 0; round < rounds; round++ {
				for _, pod := range pods {
					del(pod, uids[pod])
				}
				if tc.duringStartup {
					// Delete each replacement as soon as it exists, before it is Ready.
					for _, pod := range pods {
						var uid types.UID
						eventually(t, pod+" recreated", func() (bool, string) {
							p, err := cli.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
							if err != nil || p.UID == uids[pod] {
								return false, state(pod)
							}
							uid = p.UID
							return true, ""
						})
						del(pod, uid)
						uids[pod+"/starting"] = uid
					}
					for _, pod := range pods {
						// The one deleted while starting must be replaced too.
						eventually(t, pod+" replaced again", func() (bool, string) {
							p, err := cli.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
							if err != nil || p.UID == uids[pod+"/starting"] || p.UID == uids[pod] {
								return false, state(pod)
							}
							return true, ""
						})
					}
				}
				waitReplaced(fmt.Sprintf("replaced (new UID) and Ready, round %d", round+1))
			}
		})
	}
}
