package bundleimage

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/ociregistry"
)

func testBundle(t *testing.T) Bundle {
	dir := t.TempDir()
	files := map[string]string{
		"index.html":          "<h1>hi</h1>",
		"assets/app.js":       "console.log(1)",
		".assetsignore":       "_worker.js\n# comment\n/private/\n",
		"_headers":            "/*\n  X-A: b\n",
		"_redirects":          "/a /b 301\n",
		"_worker.js/index.js": "export default {}",
		"private/key.txt":     "secret",
		"deep/private/ok.txt": "kept: the pattern is anchored at the top",
	}
	writeTree(t, dir, files)
	return Bundle{
		Modules: []Module{
			{Name: "index.js", Type: v1alpha1.ModuleESModule, Data: []byte(`import "./chunks/a.js"; export default {}`)},
			{Name: "chunks/a.js", Type: v1alpha1.ModuleESModule, Data: []byte(`export const a = 1`)},
			{Name: "x.wasm", Type: v1alpha1.ModuleWasm, Data: []byte("\x00asm\x01\x00\x00\x00")},
		},
		AssetsDir:    dir,
		AssetsConfig: map[string]any{"not_found_handling": "single-page-application"},
	}
}

// writeTree writes files (slash path -> content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// imageFiles flattens img into path -> content (directories as "/").
func imageFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		b, _ := io.ReadAll(tr)
		out["/"+h.Name] = string(b)
	}
}

// TestBuild: every module under /bundle, the assets under /assets without what
// wrangler does not upload (.assetsignore patterns, _headers, _redirects), and a
// manifest naming the modules with their types, main first.
func TestBuild(t *testing.T) {
	img, m, err := Build(testBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	files := imageFiles(t, img)
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	want := []string{"/assets/assets/app.js", "/assets/deep/private/ok.txt", "/assets/index.html",
		"/bundle/chunks/a.js", "/bundle/index.js", "/bundle/x.wasm", "/workerd-bundle.json"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("files %v, want %v", paths, want)
	}
	var got Manifest
	if err := json.Unmarshal([]byte(files[ManifestPath]), &got); err != nil {
		t.Fatal(err)
	}
	wantMods := []v1alpha1.ImageModule{{Name: "index.js", Type: "ESModule"}, {Name: "chunks/a.js", Type: "ESModule"}, {Name: "x.wasm", Type: "Wasm"}}
	if got.Main != "index.js" || got.ModulesPath != "/bundle" || !reflect.DeepEqual(got.Modules, wantMods) {
		t.Errorf("manifest %+v, want main index.js, modulesPath /bundle, modules %v", got, wantMods)
	}
	if got.Assets == nil || got.Assets.Path != "/assets" || got.Assets.Files != 3 || got.Assets.Config["not_found_handling"] != "single-page-application" {
		t.Errorf("manifest assets %+v, want /assets with 3 files and the config", got.Assets)
	}
	if !reflect.DeepEqual(*m, got) {
		t.Errorf("returned manifest %+v differs from the image's %+v", *m, got)
	}
	layers, _ := img.Layers()
	if len(layers) != 2 {
		t.Errorf("%d layers, want 2 (code, assets)", len(layers))
	}
}

// TestReproducible: the same bundle gives the same digest; another byte another one.
func TestReproducible(t *testing.T) {
	b := testBundle(t)
	a, _, err := Build(b)
	if err != nil {
		t.Fatal(err)
	}
	// Touch every asset: times must not reach the image.
	_ = filepath.Walk(b.AssetsDir, func(p string, _ os.FileInfo, _ error) error {
		return os.Chtimes(p, epoch.AddDate(30, 0, 0), epoch.AddDate(30, 0, 0))
	})
	again, _, _ := Build(b)
	da, _ := a.Digest()
	dagain, _ := again.Digest()
	if da != dagain {
		t.Errorf("digests %s and %s for the same bundle", da, dagain)
	}
	b.Modules[1].Data = []byte(`export const a = 2`)
	other, _, _ := Build(b)
	if d, _ := other.Digest(); d == da {
		t.Errorf("a changed module kept digest %s", d)
	}
}

// TestPushPull: the image pushed to a real registry (CNCF distribution, on loopback,
// plain HTTP) comes back with the same digest, and Pinned names it by that digest.
func TestPushPull(t *testing.T) {
	reg, err := ociregistry.Start(context.Background(), ociregistry.Config{Addr: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	img, _, err := Build(testBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/team/site:1"
	if err := Push(ref, img); err != nil {
		t.Fatal(err)
	}
	pinned, err := Pinned(ref, img)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if want := reg.Host + "/team/site@" + d.String(); pinned != want {
		t.Errorf("Pinned %q, want %q", pinned, want)
	}
	r, err := name.ParseReference(pinned)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	if pd, _ := pulled.Digest(); pd != d {
		t.Errorf("pulled digest %s, pushed %s", pd, d)
	}
	if got := imageFiles(t, pulled)["/bundle/chunks/a.js"]; got != "export const a = 1" {
		t.Errorf("pulled chunks/a.js %q", got)
	}
}
