package realnode

import (
	"context"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// warnings collects the API server's warning headers.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.text
	w.text = nil
	return out
}

// dryRunNS enforces, warns and audits Pod Security "restricted" (latest).
const dryRunNS = "realnode-dryrun"

// TestRenderedPodTemplatesPassRestricted: the pod template of every Deployment and
// StatefulSet the operator created, as a Pod created with dryRun=All in a namespace
// enforcing Pod Security "restricted", is admitted without an error or a warning.
func TestRenderedPodTemplatesPassRestricted(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dryRunNS, Labels: map[string]string{}}}
	for _, mode := range []string{"enforce", "warn", "audit"} {
		ns.Labels["pod-security.kubernetes.io/"+mode] = "restricted"
		ns.Labels["pod-security.kubernetes.io/"+mode+"-version"] = "latest"
	}
	if _, err := cluster.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.client.CoreV1().Namespaces().Delete(context.Background(), dryRunNS, metav1.DeleteOptions{})
	})
	pods := operatorPodTemplates(t)
	kinds := map[string]int{}
	for _, p := range pods {
		kinds[p.kind]++
	}
	if kinds["Deployment"] == 0 || kinds["StatefulSet"] == 0 {
		t.Fatalf("operator-created workloads %v: want Deployments and StatefulSets (the samples' Workers, Durable Objects and Workflows)", kinds)
	}
	w := &warnings{}
	cfg := rest.CopyConfig(cluster.rest)
	cfg.WarningHandler = w
	cli, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		ensureServiceAccount(t, p.pod.Spec.ServiceAccountName)
		_, err := cli.CoreV1().Pods(dryRunNS).Create(ctx, p.pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Errorf("%s: dry-run create of its pod template: %v", p.from, err)
		}
		if ws := w.take(); len(ws) > 0 {
			t.Errorf("%s: dry-run create of its pod template warned: %q", p.from, ws)
		}
	}
	t.Logf("%d pod templates admitted under restricted: %v", len(pods), kinds)
	refusedWithNetRaw(t, cli, pods[0])
}

// refusedWithNetRaw: the same dry run of a template whose first container adds the
// NET_RAW capability (valid, but not "restricted") is refused, so the namespace does
// enforce and an admitted template means something.
func refusedWithNetRaw(t *testing.T, cli kubernetes.Interface, p templatePod) {
	t.Helper()
	pod := p.pod.DeepCopy()
	c := &pod.Spec.Containers[0]
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	if c.SecurityContext.Capabilities == nil {
		c.SecurityContext.Capabilities = &corev1.Capabilities{}
	}
	c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, "NET_RAW")
	_, err := cli.CoreV1().Pods(dryRunNS).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s adding NET_RAW: dry-run create returned %v, want Forbidden by Pod Security", p.from, err)
	}
}

type templatePod struct {
	kind, from string
	pod        *corev1.Pod
}

// operatorPodTemplates lists the pod templates of the Deployments and StatefulSets the
// operator created (app.kubernetes.io/managed-by=workerd-operator) as Pods in dryRunNS,
// with the volumes a StatefulSet's claim templates give its pods.
func operatorPodTemplates(t *testing.T) []templatePod {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: podcontract.LabelManagedBy + "=" + podcontract.ManagedBy}
	deps, err := cluster.client.AppsV1().Deployments("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	stss, err := cluster.client.AppsV1().StatefulSets("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	var out []templatePod
	for _, d := range deps.Items {
		out = append(out, templatePod{"Deployment", "Deployment " + d.Namespace + "/" + d.Name, podFromTemplate(d.Name, d.Spec.Template)})
	}
	for _, s := range stss.Items {
		out = append(out, templatePod{"StatefulSet", "StatefulSet " + s.Namespace + "/" + s.Name, statefulSetPod(s)})
	}
	return out
}

func podFromTemplate(name string, tpl corev1.PodTemplateSpec) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: name + "-",
			Namespace:    dryRunNS,
			Labels:       tpl.Labels,
			Annotations:  tpl.Annotations,
		},
		Spec: *tpl.Spec.DeepCopy(),
	}
}

// statefulSetPod is pod 0 of s as the StatefulSet controller makes it: the template plus
// one persistentVolumeClaim volume per claim template.
func statefulSetPod(s appsv1.StatefulSet) *corev1.Pod {
	p := podFromTemplate(s.Name, s.Spec.Template)
	for _, c := range s.Spec.VolumeClaimTemplates {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("%s-%s-0", c.Name, s.Name)},
		}})
	}
	p.Spec.Hostname, p.Spec.Subdomain = s.Name+"-0", s.Spec.ServiceName
	return p
}

// ensureServiceAccount creates the pod's ServiceAccount in dryRunNS (the ServiceAccount
// admission plugin refuses a pod whose account does not exist).
func ensureServiceAccount(t *testing.T, name string) {
	t.Helper()
	if name == "" || name == "default" {
		return
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := cluster.client.CoreV1().ServiceAccounts(dryRunNS).Create(context.Background(), sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
