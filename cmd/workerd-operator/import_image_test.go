package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/ociregistry"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestImportImage: `import --image REF --push` packs every module of a multi-module
// bundle into an image in a real registry and writes a Worker whose source.image names
// it by digest and lists the modules with their types, main first; the same project
// imported again gives the same digest (a reproducible image).
func TestImportImage(t *testing.T) {
	bin := buildCommand(t)
	reg, err := ociregistry.Start(context.Background(), ociregistry.Config{Addr: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	bundle := t.TempDir()
	for p, s := range map[string]string{
		"index.js":        `import { g } from "./chunks/g.js"; export default { fetch() { return new Response(g()); } };`,
		"chunks/g.js":     `export const g = () => "hi";`,
		"data/words.json": `["a"]`,
		"index.js.map":    `{}`,
		"README.md":       "generated at a time",
	} {
		f := filepath.Join(bundle, p)
		_ = os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	project := filepath.Join(testenv.SharedFile(t, "testdata", "cloudflare-templates"), "hello-world-do-template")
	ref := reg.Host + "/demo/hello:1"
	imported := func() *v1alpha1.Worker {
		stdout, stderr, code := runCommand(t, bin, "import", project, "--bundle", bundle, "--image", ref, "--push",
			"--image-archive", filepath.Join(t.TempDir(), "image.tar"))
		if code != 0 {
			t.Fatalf("import --image: exit %d\n%s", code, stderr)
		}
		var w v1alpha1.Worker
		if err := yaml.Unmarshal([]byte(strings.Split(stdout, "\n---\n")[0]), &w); err != nil {
			t.Fatal(err)
		}
		return &w
	}
	w := imported()
	src := w.Spec.Source.Image
	if src == nil || w.Spec.Source.Inline != nil {
		t.Fatalf("source %+v, want image only", w.Spec.Source)
	}
	if !strings.HasPrefix(src.Image, reg.Host+"/demo/hello@sha256:") || src.Path != "/bundle" || src.Main != "index.js" {
		t.Errorf("source.image %q path %q main %q, want %s/demo/hello@sha256:..., /bundle, index.js", src.Image, src.Path, src.Main, reg.Host)
	}
	want := []v1alpha1.ImageModule{{Name: "index.js", Type: "ESModule"}, {Name: "chunks/g.js", Type: "ESModule"}, {Name: "data/words.json", Type: "JSON"}}
	if !reflect.DeepEqual(src.Modules, want) {
		t.Errorf("modules %v, want %v", src.Modules, want)
	}
	r, err := name.ParseReference(src.Image)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Image(r); err != nil {
		t.Errorf("the pinned image is not in the registry: %v", err)
	}
	if again := imported(); again.Spec.Source.Image.Image != src.Image {
		t.Errorf("second import named %s, first %s: the image is not reproducible", again.Spec.Source.Image.Image, src.Image)
	}
	_, stderr, code := runCommand(t, bin, "import", project, "--bundle", bundle, "--image", ref)
	if code == 0 || !strings.Contains(stderr, "--image needs --push or --image-archive") {
		t.Errorf("--image alone: exit %d, want an error naming --push\n%s", code, stderr)
	}
}
