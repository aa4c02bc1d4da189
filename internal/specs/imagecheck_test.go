package specs

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// A Worker whose modules or assets are image volumes gets the image-check init
// container first: it mounts each image volume exactly as workerd does (same volume,
// path and subPath, read only), runs as workerd's user with the same restricted
// security context, and names each mount with its field.
func TestImageCheckInitContainer(t *testing.T) {
	w := fixtureWorker(func(w *fleetv1alpha1.Worker) {
		w.Spec.Source = fleetv1alpha1.WorkerSource{Image: &fleetv1alpha1.ImageSource{
			Image: "registry.example/team/site:1", Path: "/bundle", Main: "index.js"}}
		w.Spec.Assets = &fleetv1alpha1.WorkerAssets{Image: "registry.example/team/assets:1", Path: "/dist"}
	})
	pod := build(t, w).Deployment.Spec.Template.Spec
	if len(pod.InitContainers) != 2 || pod.InitContainers[0].Name != podcontract.ImageCheckContainer || pod.InitContainers[1].Name != podcontract.SidecarContainer {
		t.Fatalf("init containers %v, want [%s %s]", names(pod.InitContainers), podcontract.ImageCheckContainer, podcontract.SidecarContainer)
	}
	ic, workerd := pod.InitContainers[0], pod.Containers[0]
	if ic.RestartPolicy != nil {
		t.Errorf("image-check restartPolicy %v: it must run to completion before the sidecar and workerd", *ic.RestartPolicy)
	}
	if ic.Image != DefaultOptions().OperatorImage {
		t.Errorf("image-check image %q, want the operator's image %q", ic.Image, DefaultOptions().OperatorImage)
	}
	wantArgs := []string{podcontract.ImageCheckCommand, "spec.source.image=" + podcontract.ModulesDir, "spec.assets=" + podcontract.AssetsDir}
	if !reflect.DeepEqual(ic.Args, wantArgs) {
		t.Errorf("image-check args %q, want %q", ic.Args, wantArgs)
	}
	for _, name := range []string{"modules", "assets"} {
		wm := mountOf(workerd.VolumeMounts, name)
		im := mountOf(ic.VolumeMounts, name)
		if wm == nil || im == nil || !reflect.DeepEqual(*wm, *im) || !im.ReadOnly {
			t.Errorf("volume %s: image-check mount %+v, workerd's %+v: want the same, read only", name, im, wm)
		}
	}
	if len(ic.VolumeMounts) != 2 {
		t.Errorf("image-check mounts %+v: want the image volumes only (never the internal TLS key)", ic.VolumeMounts)
	}
	if !reflect.DeepEqual(ic.SecurityContext, workerd.SecurityContext) {
		t.Errorf("image-check securityContext %+v, want workerd's %+v (the check must see what workerd's user sees)", ic.SecurityContext, workerd.SecurityContext)
	}
	if ic.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("terminationMessagePolicy %q: the log carries the refused link to status.lastFailure", ic.TerminationMessagePolicy)
	}
	if ic.Resources.Limits.Memory().IsZero() {
		t.Errorf("image-check has no memory limit")
	}
}

// Assets from the source image (one bundle image) are checked as mounted: both mounts.
// Modules from a ConfigMap or inline need no check: the operator writes those files.
func TestImageCheckOnlyForImageVolumes(t *testing.T) {
	pod := build(t, fixtureWorker()).Deployment.Spec.Template.Spec
	if n := names(pod.InitContainers); !reflect.DeepEqual(n, []string{podcontract.SidecarContainer}) {
		t.Errorf("inline Worker init containers %v, want only the sidecar", n)
	}
	w := fixtureWorker(func(w *fleetv1alpha1.Worker) {
		w.Spec.Assets = &fleetv1alpha1.WorkerAssets{Image: "registry.example/team/assets:1"}
	})
	pod = build(t, w).Deployment.Spec.Template.Spec
	if got, want := pod.InitContainers[0].Args, []string{podcontract.ImageCheckCommand, "spec.assets=" + podcontract.AssetsDir}; !reflect.DeepEqual(got, want) {
		t.Errorf("assets-only Worker: image-check args %q, want %q", got, want)
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func mountOf(ms []corev1.VolumeMount, name string) *corev1.VolumeMount {
	i := slices.IndexFunc(ms, func(m corev1.VolumeMount) bool { return m.Name == name })
	if i < 0 {
		return nil
	}
	return &ms[i]
}
