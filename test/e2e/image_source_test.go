package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/hack/ociimage"
	"github.com/workerd-operator/workerd-operator/internal/devcluster"
)

// bundleImage holds the bundle of TestImageSourceServes; the suite builds it as an OCI
// image archive and maps it in the local cluster's image mapping (volumes).
const bundleImage = "localhost/workerd-operator/e2e-bundle:1"

// suiteImages is config/dev/images.yaml plus the bundle image, written into
// <dir>/bundle.tar: one ES module under /bundle (the renderer embeds only
// spec.source.image.main), and the asset images of assets_test.go and imagecheck_test.go.
func suiteImages(dir string) (*devcluster.ImageMapping, error) {
	m, err := devcluster.LoadImageMapping(filepath.Join(repoRoot, "config", "dev", "images.yaml"))
	if err != nil {
		return nil, err
	}
	bundle := &ociimage.Image{Ref: bundleImage, Layers: [][]ociimage.File{{
		{Path: "/bundle", Dir: true, Mode: 0o755},
		{Path: "/bundle/index.js", Mode: 0o644, Data: []byte(`const greeting = "from an image: ";
export default { async fetch(req) { return new Response(greeting + new URL(req.url).pathname + "\n"); } };
`)},
	}}}
	archive := filepath.Join(dir, "bundle.tar")
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return nil, err
	}
	if err := bundle.WriteArchive(archive); err != nil {
		return nil, err
	}
	m.Volumes = append(m.Volumes, devcluster.ImageDirectory{Image: strings.TrimSuffix(bundleImage, ":1"), Archive: archive})
	assets, err := assetsImageVolume(dir)
	if err != nil {
		return nil, err
	}
	links, err := linksImageVolume(dir)
	if err != nil {
		return nil, err
	}
	geoip, err := geoipImageVolume(dir)
	if err != nil {
		return nil, err
	}
	m.Volumes = append(m.Volumes, assets, links, geoip)
	return m, nil
}

// TestImageSourceServes: a Worker whose modules come from an OCI image (an image volume
// with a subPath, nested in the config volume) serves on the local cluster as it does on
// a real kubelet (test/realnode).
func TestImageSourceServes(t *testing.T) {
	ctx := context.Background()
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.workerd-operator.io/v1alpha1",
		"kind":       "Worker",
		"metadata":   map[string]any{"name": "image-worker", "namespace": sampleNS},
		"spec": map[string]any{
			"compatibilityDate": "2026-11-01",
			"replicas":          int64(1),
			"source": map[string]any{"image": map[string]any{
				"image": bundleImage, "path": "/bundle", "main": "index.js", "pullPolicy": "IfNotPresent",
			}},
		},
	}}
	if err := cluster.Apply(ctx, []*unstructured.Unstructured{w}, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	if err := cluster.WaitReady(ctx, []*unstructured.Unstructured{w}, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	url := serviceURL(t, "image-worker")
	var body string
	eventually(t, time.Minute, "GET image-worker", func() (err error) {
		body, err = get(url + "/x")
		return err
	})
	if want := "from an image: /x"; !strings.Contains(body, want) {
		t.Errorf("body %q, want %q", body, want)
	}
}
