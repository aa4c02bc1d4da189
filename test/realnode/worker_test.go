package realnode

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

var httpClient = &http.Client{Timeout: 5 * time.Second}

func get(url string) (string, error) { return getWith(httpClient, url) }

// getWith GETs url with c and returns the body of a 200 answer.
func getWith(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// httpPort is the Service's http port (the first port not named rpc).
func httpPort(s *corev1.Service) (corev1.ServicePort, bool) {
	for _, p := range s.Spec.Ports {
		if p.Name != "rpc" {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

// TestSampleWorkerServes: the plain sample answers through its Service's ClusterIP
// (kube-proxy's iptables rules) and on every pod IP (the CNI bridge), from real
// containers.
func TestSampleWorkerServes(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	svc, err := cluster.client.CoreV1().Services(sampleNS).Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port, ok := httpPort(svc)
	if !ok {
		t.Fatalf("Service hello has no http port: %+v", svc.Spec.Ports)
	}
	want := "Hello from workerd-operator! You asked for /realnode"
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port.Port))) + "/realnode"
	var body string
	eventually(t, time.Minute, "GET "+url, func() (err error) {
		body, err = get(url)
		return err
	})
	if !strings.Contains(body, want) {
		t.Errorf("Service: body %q, want %q", body, want)
	}
	pods := podsOf(t, sampleNS, svc.Spec.Selector)
	if len(pods) != 2 {
		t.Errorf("%d pods behind Service hello, want the sample's 2 replicas", len(pods))
	}
	for _, p := range pods {
		u := "http://" + net.JoinHostPort(p.Status.PodIP, port.TargetPort.String()) + "/realnode"
		if port.TargetPort.IntValue() == 0 {
			u = "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.Port))) + "/realnode"
		}
		b, err := get(u)
		if err != nil || !strings.Contains(b, want) {
			t.Errorf("pod %s: GET %s = %q, %v", p.Name, u, b, err)
		}
	}
}

func podsOf(t *testing.T, ns string, selector map[string]string) []corev1.Pod {
	t.Helper()
	l, err := cluster.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

// TestPodsRunRestricted: every pod of the product was admitted in a namespace enforcing
// Pod Security "restricted", and each of its running containers is a real container: a
// process whose mount namespace and cgroup differ from the node's, running as a non-root
// user, with a read-only root file system.
func TestPodsRunRestricted(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	self := procInfo(t, os.Getpid())
	checked := 0
	for _, ns := range []string{managerNS, sampleNS} {
		n, err := cluster.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
			t.Errorf("namespace %s: enforce=%q, want restricted", ns, got)
		}
		pods, err := cluster.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue // being stopped: its processes may be gone while its status says running
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running == nil {
					continue
				}
				id := cs.ContainerID[strings.Index(cs.ContainerID, "://")+3:]
				pid := containerPID(t, id)
				if pid == 0 {
					t.Errorf("%s/%s container %s: no process in cgroup %s", ns, p.Name, cs.Name, id)
					continue
				}
				c := procInfo(t, pid)
				where := fmt.Sprintf("%s/%s container %s (pid %d)", ns, p.Name, cs.Name, pid)
				if c.uid == "0" {
					t.Errorf("%s runs as root", where)
				}
				if c.mntNS == self.mntNS || c.cgroup == self.cgroup {
					t.Errorf("%s shares the node's mount namespace or cgroup: %+v vs %+v", where, c, self)
				}
				if !c.rootRO {
					t.Errorf("%s: root file system is writable", where)
				}
				checked++
			}
		}
	}
	if checked < 3 {
		t.Errorf("checked %d containers, want the manager's and the samples'", checked)
	}
}

type pinfo struct {
	uid, mntNS, cgroup string
	rootRO             bool
}

func procInfo(t *testing.T, pid int) pinfo {
	t.Helper()
	var p pinfo
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			p.uid = f[2] // effective
		}
	}
	p.mntNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, l := range strings.Split(string(cg), "\n") {
		if strings.Contains(l, ":memory:") {
			p.cgroup = l
		}
	}
	mi, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && f[4] == "/" {
			p.rootRO = strings.HasPrefix(f[5], "ro")
		}
	}
	return p
}

// containerPID finds the first process whose memory cgroup path ends in the container id.
func containerPID(t *testing.T, id string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		for _, l := range strings.Split(string(cg), "\n") {
			if strings.Contains(l, ":memory:") && strings.HasSuffix(l, "/"+id) {
				return pid
			}
		}
	}
	return 0
}

// TestConfigMapSourceServes: a Worker whose modules come from a ConfigMap (the issue's
// new-user case, which crash-looped on the dev cluster) serves on the real node.
func TestConfigMapSourceServes(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-worker-src", Namespace: sampleNS},
		Data: map[string]string{
			"index.js": `import { greeting } from "./lib.js";
export default { async fetch(req) { return new Response(greeting + new URL(req.url).pathname + "\n"); } };
`,
			"lib.js": `export const greeting = "from a ConfigMap: ";`,
		},
	}
	if _, err := cluster.client.CoreV1().ConfigMaps(sampleNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.client.CoreV1().ConfigMaps(sampleNS).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	workerServes(t, "cm-worker", map[string]any{"configMap": map[string]any{"name": "cm-worker-src", "main": "index.js"}}, "from a ConfigMap: /x")
}

// TestImageSourceServes: a Worker whose modules come from a directory of an OCI image
// (an image volume with a subPath, nested in the config volume) serves on the real node.
func TestImageSourceServes(t *testing.T) {
	requireNode(t)
	workerServes(t, "image-worker", map[string]any{"image": map[string]any{
		"image": bundleImage, "path": "/bundle", "main": "index.js", "pullPolicy": "IfNotPresent",
	}}, "from an image: /x")
}

// workerServes applies a one-replica Worker with the given source, waits for it to be
// Ready and checks GET /x through its Service answers want.
func workerServes(t *testing.T, name string, source map[string]any, want string) {
	t.Helper()
	url := applyWorker(t, name, map[string]any{"source": source}) + "/x"
	var body string
	eventually(t, time.Minute, "GET "+url, func() (err error) {
		body, err = get(url)
		return err
	})
	if !strings.Contains(body, want) {
		t.Errorf("body %q, want %q", body, want)
	}
}

// applyWorker applies a one-replica Worker with the spec fields given, removed at the
// test's end, waits for it to be Ready and returns its Service's URL.
func applyWorker(t *testing.T, name string, fields map[string]any) string {
	t.Helper()
	ctx := context.Background()
	spec := map[string]any{"compatibilityDate": "2026-11-01", "replicas": int64(1)}
	maps.Copy(spec, fields)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleetGroup + "/v1alpha1",
		"kind":       "Worker",
		"metadata":   map[string]any{"name": name, "namespace": sampleNS},
		"spec":       spec,
	}}
	removeAtEnd(t, []*unstructured.Unstructured{w})
	if err := cluster.apply(ctx, []*unstructured.Unstructured{w}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.waitReady(ctx, []*unstructured.Unstructured{w}, 3*time.Minute); err != nil {
		logPods(t, sampleNS, name)
		t.Fatal(err)
	}
	svc, err := cluster.client.CoreV1().Services(sampleNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port, _ := httpPort(svc)
	return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port.Port)))
}

// TestWorkerdRestartedAfterKill: killing a hello pod's workerd process (SIGKILL, in its
// container) makes the kubelet restart the container, and the pod serves again.
func TestWorkerdRestartedAfterKill(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	svc, err := cluster.client.CoreV1().Services(sampleNS).Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := podsOf(t, sampleNS, svc.Spec.Selector)
	if len(pods) == 0 {
		t.Fatal("no hello pod")
	}
	pod := pods[0]
	var before int32
	var id string
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "workerd" {
			before, id = cs.RestartCount, cs.ContainerID[strings.Index(cs.ContainerID, "://")+3:]
		}
	}
	pid := containerPID(t, id)
	if pid == 0 {
		t.Fatalf("no process for workerd container %s", id)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	port, _ := httpPort(svc)
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port.TargetPort.IntValue()))) + "/again"
	if port.TargetPort.IntValue() == 0 {
		url = "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port.Port))) + "/again"
	}
	eventually(t, 2*time.Minute, "workerd restarted and ready", func() error {
		p, err := cluster.client.CoreV1().Pods(sampleNS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "workerd" && (cs.RestartCount <= before || !cs.Ready) {
				return fmt.Errorf("restarts %d (was %d), ready %v", cs.RestartCount, before, cs.Ready)
			}
		}
		_, err = get(url)
		return err
	})
}

// logPods logs the state and log tail of the pods whose name starts with prefix.
func logPods(t *testing.T, ns, prefix string) {
	t.Helper()
	ctx := context.Background()
	pods, _ := cluster.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if pods == nil {
		return
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, prefix) {
			continue
		}
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			t.Logf("pod %s container %s: restarts=%d %s", p.Name, cs.Name, cs.RestartCount, containerState(cs))
			if cs.LastTerminationState.Terminated != nil {
				t.Logf("  last termination: %s", cs.LastTerminationState.Terminated.Message)
			}
			logs, _ := cluster.client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, TailLines: ptr(int64(20)), Previous: cs.RestartCount > 0}).DoRaw(ctx)
			t.Logf("  logs:\n%s", logs)
		}
	}
}
