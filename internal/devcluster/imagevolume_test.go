package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/hack/ociimage"
)

// TestUnpackImage: an OCI layout archive (as hack/ociimage writes for the suites) is
// unpacked layer by layer with whiteouts, once per manifest, and a layer writing through
// a symbolic link of an earlier layer is refused.
func TestUnpackImage(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	img := &ociimage.Image{Ref: "localhost/t/bundle:1", Layers: [][]ociimage.File{
		{
			{Path: "/bundle", Dir: true, Mode: 0o755},
			{Path: "/bundle/index.js", Mode: 0o644, Data: []byte("v1")},
			{Path: "/bundle/gone.js", Mode: 0o644, Data: []byte("x")},
			{Path: "/old", Dir: true, Mode: 0o755},
			{Path: "/old/a", Mode: 0o644, Data: []byte("a")},
			{Path: "/link", Link: "bundle/index.js"},
		},
		{
			{Path: "/bundle/index.js", Mode: 0o644, Data: []byte("v2")},
			{Path: "/bundle/.wh.gone.js", Mode: 0o644},
			{Path: "/old/.wh..wh..opq", Mode: 0o644},
			{Path: "/old/b", Mode: 0o644, Data: []byte("b")},
		},
	}}
	archive := filepath.Join(dir, "bundle.tar")
	if err := img.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	root, err := unpackImage(archive, img.Ref, cache)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"bundle/index.js": "v2", "old/b": "b", "link": "v2"} {
		if b, err := os.ReadFile(filepath.Join(root, file)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	for _, file := range []string{"bundle/gone.js", "bundle/.wh.gone.js", "old/a", "old/.wh..wh..opq"} {
		if _, err := os.Lstat(filepath.Join(root, file)); !os.IsNotExist(err) {
			t.Errorf("%s is there (%v), want it whited out", file, err)
		}
	}
	again, err := unpackImage(archive, img.Ref, cache)
	if err != nil || again != root {
		t.Errorf("second unpack = %q, %v; want the cached %q", again, err, root)
	}

	outside := t.TempDir()
	evil := &ociimage.Image{Ref: "localhost/t/evil:1", Layers: [][]ociimage.File{
		{{Path: "/esc", Link: outside}},
		{{Path: "/esc/planted", Mode: 0o644, Data: []byte("x")}},
	}}
	if err := evil.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	if _, err := unpackImage(archive, evil.Ref, cache); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("unpack through a link: %v, want an error naming the symbolic link", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a layer wrote outside the image's directory")
	}
}

// TestImageMappingDirectory: an image volume's reference resolves through the mapping's
// volumes (tag ignored); an unmapped one names the mapping file.
func TestImageMappingDirectory(t *testing.T) {
	d := t.TempDir()
	m := &ImageMapping{Source: "images.yaml", Volumes: []ImageDirectory{{Image: "localhost/t/dir", Directory: d}}}
	if got, err := m.Directory("localhost/t/dir:7"); err != nil || got != d {
		t.Errorf("Directory = %q, %v; want %q", got, err, d)
	}
	if _, err := m.Directory("localhost/t/other:1"); err == nil || !strings.Contains(err.Error(), "images.yaml") {
		t.Errorf("unmapped image: %v, want an error naming images.yaml", err)
	}
}

// TestImageVolume: a pod's image volume is the image's filesystem (an OCI layout archive
// from the mapping's volumes), mounted with a subPath at the mount path.
func TestImageVolume(t *testing.T) {
	ctx := context.Background()
	cli := cluster.Client()
	img := &ociimage.Image{Ref: "localhost/t/volume:1", Layers: [][]ociimage.File{{
		{Path: "/bundle", Dir: true, Mode: 0o755},
		{Path: "/bundle/index.js", Mode: 0o644, Data: []byte("from the image\n")},
	}}}
	archive := filepath.Join(t.TempDir(), "volume.tar")
	if err := img.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	m := cluster.cfg.Images
	m.mu.Lock()
	m.Volumes = append(m.Volumes, ImageDirectory{Image: "localhost/t/volume", Archive: archive})
	m.mu.Unlock()
	out := t.TempDir()
	pod := shPod("image-volume", corev1.RestartPolicyNever, `cp "$IN" "$OUT"`)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "IN", Value: "/mods/index.js"}, {Name: "OUT", Value: "/out/copy.js"}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "mods", MountPath: "/mods", SubPath: "bundle", ReadOnly: true},
		{Name: "out", MountPath: "/out"},
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "mods", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: img.Ref, PullPolicy: corev1.PullIfNotPresent}}},
		{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}},
	}
	if _, err := cli.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "image-volume Succeeded", func() (bool, string) {
		p, err := cli.CoreV1().Pods("default").Get(ctx, "image-volume", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("%+v %v", p, err)
	})
	if b, err := os.ReadFile(filepath.Join(out, "copy.js")); err != nil || string(b) != "from the image\n" {
		t.Fatalf("copied module: %q %v, want %q", b, err, "from the image\n")
	}
}
