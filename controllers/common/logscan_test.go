package common

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// scanWorker fetches ?u= and answers with what it got or the error it caught; it also
// logs a console line that reads like a failure (the Worker's own output, not counted).
const scanWorker = `export default { async fetch(request) {
  console.log("upstream timed out? connecting to 10.0.0.1:80 is not allowed?");
  try { const r = await fetch(new URL(request.url).searchParams.get("u")); return new Response("fetch " + r.status); }
  catch (e) { return new Response("error " + e.message); }
} };`

// scanConfig: the pinned workerd with the operator's logging (structured) and an
// internet service allowing only public addresses, so loopback targets are refused.
const scanConfig = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = (modules = [(name = "w.js", esModule = embed "w.js")], compatibilityDate = "2026-11-01", globalOutbound = "internet")),
    (name = "internet", network = (allow = ["public"])),
  ],
  sockets = [(name = "http", address = "*:8080", http = (), service = "main")],
  logging = (structuredLogging = true),
);
`

// TestLogScannerOnLocalCluster: the scanner reads a running workerd pod's log through
// the API server and the local cluster's kubelet (pods/log with sinceTime, tailLines,
// limitBytes, timestamps), finds the refused connection as outbound_denied naming the
// address, queues one wake-up for the owner, reads nothing new on the next round, and
// finds a later refusal as the newer failure.
func TestLogScannerOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	cluster := startCluster(t)
	pod := startScanPod(t, cluster)
	c, err := client.New(cluster.RestConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := NewLogScanner(cluster.Client().CoreV1(), c, time.Minute, podcontract.LabelWorker, podcontract.ComponentWorker, logr.Discard())
	owner := types.NamespacedName{Namespace: pod.Namespace, Name: "reacher"}

	first := refuseAndScan(t, s, pod, owner, "127.0.0.1:9")
	if len(s.events) != 1 {
		t.Errorf("%d wake-ups queued, want 1", len(s.events))
	}
	s.Scan(context.Background())
	if f := s.Newest(owner); f.Message != first.Message || !f.Time.Equal(&first.Time) || len(s.events) != 1 {
		t.Errorf("a round without new lines: newest %+v, %d wake-ups; want %+v, 1", f, len(s.events), first)
	}
	// The next refusal in a later second (the API's precision) is the newer failure.
	for !time.Now().After(first.Time.Add(time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	refuseAndScan(t, s, pod, owner, "127.0.0.1:7")
	if len(s.events) != 2 {
		t.Errorf("%d wake-ups queued, want 2", len(s.events))
	}
}

// refuseAndScan makes the pod's Worker fetch addr, which its policy refuses, and scans
// until the owner's newest failure names addr; it returns that failure.
func refuseAndScan(t *testing.T, s *LogScanner, pod *corev1.Pod, owner types.NamespacedName, addr string) *failure.Failure {
	t.Helper()
	var body string
	waitFor(t, "the Worker answers", func() error {
		var err error
		body, err = httpGet("http://" + pod.Status.PodIP + ":8080/?u=" + url.QueryEscape("http://"+addr+"/"))
		return err
	})
	if !strings.HasPrefix(body, "error internal error; reference = ") {
		t.Fatalf("body %q, want workerd's internal error", body)
	}
	ref := strings.TrimPrefix(body, "error internal error; reference = ")
	var f *failure.Failure
	waitFor(t, "a scan finds the refusal of "+addr, func() error {
		s.Scan(context.Background())
		if f = s.Newest(owner); f == nil || !strings.Contains(f.Message, addr) {
			return fmt.Errorf("newest %+v", f)
		}
		return nil
	})
	if f.Cause != failure.CauseOutboundDenied || !strings.Contains(f.Message, "connecting to "+addr+" is not allowed") ||
		!strings.Contains(f.Message, ref) || f.Pod != pod.Name || f.Container != podcontract.WorkerdContainer || !f.Logged || f.Time.IsZero() {
		t.Errorf("newest %+v: want outbound_denied naming %s and reference %s, pod %s", f, addr, ref, pod.Name)
	}
	return f
}

func startCluster(t *testing.T) *devcluster.Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "logscan-test-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cluster, err := devcluster.Start(ctx, devcluster.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Stop()
		_ = os.RemoveAll(dir)
	})
	return cluster
}

// startScanPod runs scanConfig as a Ready pod labelled as a Worker's ("reacher").
func startScanPod(t *testing.T, cluster *devcluster.Cluster) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	ns := "default"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "reacher"}, Data: map[string]string{"config.capnp": scanConfig, "w.js": scanWorker}}
	if _, err := cluster.Client().CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reacher-0", Labels: map[string]string{
			podcontract.LabelComponent: podcontract.ComponentWorker, podcontract.LabelWorker: "reacher"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: podcontract.WorkerdContainer, Image: podcontract.DefaultWorkerdImage,
				Args:         []string{"serve", "/etc/workerd/config.capnp", "--socket-addr=http=$(POD_IP):8080"},
				Env:          []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/workerd"}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "reacher"}}}}},
		},
	}
	if _, err := cluster.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod Ready", func() error {
		p, err := cluster.Client().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !PodReady(p) || p.Status.PodIP == "" {
			return fmt.Errorf("status %+v", p.Status)
		}
		pod = p
		return nil
	})
	return pod
}

// waitFor polls cond until it holds; the bound only stops a hung test.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

func httpGet(u string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	r, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return string(b), err
}
