package specs

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// A class that runs containers gets the socket volume in workerd (working directory
// ConfigDir, where render.ContainerEngine names the socket) and in the sidecar, which
// is told the socket, the manager's container API, its namespace and the one image.
func TestShardPodsRunContainerEngine(t *testing.T) {
	w := fixtureWorker()
	d := &fleetv1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "boxes", UID: "uid-3"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Box",
			Container: &fleetv1alpha1.ContainerSpec{Image: "registry.example/box:1"}},
	}
	opts := DefaultOptions()
	opts.ManagerNamespace = "operators"
	pod := BuildDONSChildren(d, w, &render.Output{Version: "v"}, "inputs", opts).StatefulSet.Spec.Template.Spec
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == podcontract.ContainersVolume && v.EmptyDir != nil
	}) {
		t.Errorf("volumes %+v lack emptyDir %s", pod.Volumes, podcontract.ContainersVolume)
	}
	mounted := func(c corev1.Container) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == podcontract.ContainersVolume && m.MountPath == "/etc/workerd/containers"
		})
	}
	wd := pod.Containers[0]
	if wd.Name != podcontract.WorkerdContainer || !mounted(wd) || wd.WorkingDir != "/etc/workerd" {
		t.Errorf("workerd container %s: mounts %+v, workingDir %q", wd.Name, wd.VolumeMounts, wd.WorkingDir)
	}
	var sc *corev1.Container
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == podcontract.SidecarContainer {
			sc = &pod.InitContainers[i]
		}
	}
	if sc == nil || !mounted(*sc) {
		t.Fatalf("sidecar %+v lacks the socket volume", sc)
	}
	for _, want := range []string{
		"--containers-socket=/etc/workerd/containers/docker.sock",
		"--containers-api=https://workerd-operator-containers.operators.svc.cluster.local:9446",
		"--containers-durable-object-namespace=boxes",
		"--containers-image=registry.example/box:1",
	} {
		if !slices.Contains(sc.Args, want) {
			t.Errorf("sidecar args %q lack %q", sc.Args, want)
		}
	}
	if !slices.ContainsFunc(sc.Env, func(e corev1.EnvVar) bool { return e.Name == render.PodNameEnv }) {
		t.Errorf("sidecar env %+v lacks %s", sc.Env, render.PodNameEnv)
	}

	d.Spec.Container = nil
	plain := BuildDONSChildren(d, w, &render.Output{Version: "v"}, "inputs", opts).StatefulSet.Spec.Template.Spec
	if slices.ContainsFunc(plain.Volumes, func(v corev1.Volume) bool { return v.Name == podcontract.ContainersVolume }) || plain.Containers[0].WorkingDir != "" {
		t.Errorf("a class without containers got the engine: volumes %+v, workingDir %q", plain.Volumes, plain.Containers[0].WorkingDir)
	}
}
