package specs

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// spec.assets mounts the image's directory as an image volume where the assets service
// reads it (relative to the workerd container's working directory, ConfigDir).
func TestAssetsImageVolume(t *testing.T) {
	w := fixtureWorker(func(w *fleetv1alpha1.Worker) {
		w.Spec.Assets = &fleetv1alpha1.WorkerAssets{Image: "registry.example/team/site:1", Path: "/dist", PullPolicy: corev1.PullIfNotPresent}
	})
	pod := build(t, w).Deployment.Spec.Template.Spec
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "assets" {
			vol = &pod.Volumes[i]
		}
	}
	want := &corev1.ImageVolumeSource{Reference: "registry.example/team/site:1", PullPolicy: corev1.PullIfNotPresent}
	if vol == nil || !reflect.DeepEqual(vol.Image, want) {
		t.Fatalf("assets volume = %+v, want image %+v", vol, want)
	}
	c := pod.Containers[0]
	if c.WorkingDir != podcontract.ConfigDir {
		t.Errorf("workerd workingDir %q, want %q", c.WorkingDir, podcontract.ConfigDir)
	}
	wantMount := corev1.VolumeMount{Name: "assets", MountPath: podcontract.AssetsDir, ReadOnly: true, SubPath: "dist"}
	found := false
	for _, m := range c.VolumeMounts {
		found = found || reflect.DeepEqual(m, wantMount)
	}
	if !found {
		t.Errorf("workerd mounts %+v lack %+v", c.VolumeMounts, wantMount)
	}

	// Without assets: no volume and the image's working directory.
	pod = build(t, fixtureWorker()).Deployment.Spec.Template.Spec
	for _, v := range pod.Volumes {
		if v.Name == "assets" {
			t.Errorf("assets volume without spec.assets")
		}
	}
	if pod.Containers[0].WorkingDir != "" {
		t.Errorf("workingDir %q without spec.assets", pod.Containers[0].WorkingDir)
	}
}
