package specs

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// everyPod is the pod template of each kind of workerd pod built with opts: a Worker's
// Deployment, a Durable Object shard and a Workflow engine.
func everyPod(t *testing.T, opts Options) map[string]corev1.PodSpec {
	t.Helper()
	w := fixtureWorker()
	out := &render.Output{Version: "v"}
	d := &fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rooms", UID: "uid-2"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Room"}}
	wf := &fleetv1alpha1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders", UID: "uid-3"},
		Spec: fleetv1alpha1.WorkflowSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Orders"}}
	ws, err := BuildWorkflowChildren(wf, w, out, api.FileConfig{}, "inputs", opts)
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]corev1.PodSpec{"worker": BuildWorkerChildren(w, out, "inputs", opts).Deployment.Spec.Template.Spec}
	for kind, s := range map[string]*appsv1.StatefulSet{"shard": BuildDONSChildren(d, w, out, "inputs", opts).StatefulSet, "engine": ws.StatefulSet} {
		pods[kind] = s.Spec.Template.Spec
	}
	return pods
}

// The cluster admin's isolation settings (docs/security.md "Isolation") reach every
// workerd pod: a RuntimeClass (gVisor, Kata), user namespaces (hostUsers: false) and a
// size limit on each emptyDir. Unset, the pods carry none of them.
func TestIsolationSettingsReachEveryPod(t *testing.T) {
	opts := DefaultOptions()
	opts.RuntimeClassName = "gvisor"
	opts.HostUsers = false
	limit := resource.MustParse("256Mi")
	opts.EmptyDirSizeLimit = &limit
	for kind, pod := range everyPod(t, opts) {
		if pod.RuntimeClassName == nil || *pod.RuntimeClassName != "gvisor" {
			t.Errorf("%s: runtimeClassName %v, want gvisor", kind, pod.RuntimeClassName)
		}
		if pod.HostUsers == nil || *pod.HostUsers {
			t.Errorf("%s: hostUsers %v, want false", kind, pod.HostUsers)
		}
		n := 0
		for _, v := range pod.Volumes {
			if v.EmptyDir == nil {
				continue
			}
			n++
			if v.EmptyDir.SizeLimit == nil || !v.EmptyDir.SizeLimit.Equal(limit) {
				t.Errorf("%s: emptyDir %s sizeLimit %v, want 256Mi", kind, v.Name, v.EmptyDir.SizeLimit)
			}
		}
		if n == 0 {
			t.Errorf("%s: no emptyDir volume", kind)
		}
	}
	for kind, pod := range everyPod(t, DefaultOptions()) {
		if pod.RuntimeClassName != nil || pod.HostUsers != nil {
			t.Errorf("%s by default: runtimeClassName %v hostUsers %v, want both unset", kind, pod.RuntimeClassName, pod.HostUsers)
		}
		for _, v := range pod.Volumes {
			if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
				t.Errorf("%s by default: emptyDir %s sizeLimit %v, want none", kind, v.Name, v.EmptyDir.SizeLimit)
			}
		}
	}
}
