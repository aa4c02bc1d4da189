package devcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/bundleimage"
	"github.com/workerd-operator/workerd-operator/internal/ociregistry"
)

// TestPullImage: an image volume the mapping does not name is pulled from a real
// registry (CNCF distribution on loopback) and unpacked once per digest; pushing the
// tag again gives the new files, the old digest keeps the old ones.
func TestPullImage(t *testing.T) {
	reg, err := ociregistry.Start(context.Background(), ociregistry.Config{Addr: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	t.Setenv("WORKERD_OPERATOR_CACHE", t.TempDir())
	ref := reg.Host + "/t/bundle:1"
	push := func(body string) string {
		img, _, err := bundleimage.Build(bundleimage.Bundle{Modules: []bundleimage.Module{{Name: "index.js", Type: v1alpha1.ModuleESModule, Data: []byte(body)}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := bundleimage.Push(ref, img); err != nil {
			t.Fatal(err)
		}
		pinned, _ := bundleimage.Pinned(ref, img)
		return pinned
	}
	m := &ImageMapping{Source: "images.yaml"}
	read := func(image string) string {
		t.Helper()
		dir, err := m.Directory(image)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "bundle", "index.js"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	v1 := push("v1")
	if got := read(ref); got != "v1" {
		t.Errorf("by tag: %q, want v1", got)
	}
	push("v2")
	if got := read(ref); got != "v2" {
		t.Errorf("by tag after a new push: %q, want v2", got)
	}
	if got := read(v1); got != "v1" {
		t.Errorf("by the first digest: %q, want v1", got)
	}
	_, err = m.Directory(reg.Host + "/t/missing:1")
	if err == nil || !strings.Contains(err.Error(), "not in the image mapping images.yaml") || !strings.Contains(err.Error(), "pulling it failed") {
		t.Errorf("missing image: %v, want an error naming the mapping and the pull", err)
	}
}
