package wrangler

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/bundleimage"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

const assetsWorker = "export default { fetch() { return new Response('x'); } };\n"

// wrangler's assets keys map to spec.assets field by field, _headers and _redirects
// are read from the directory, and the image comes from AssetsImage.
func TestImportAssets(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.jsonc": `{"name": "site", "main": "worker.js", "compatibility_date": "2025-10-08",
			"assets": {"directory": "./dist/client", "binding": "ASSETS", "html_handling": "drop-trailing-slash",
				"not_found_handling": "single-page-application", "run_worker_first": ["/api/*", "!/api/docs/*"]}}`,
		"worker.js":               assetsWorker,
		"dist/client/index.html":  "<h1>home</h1>",
		"dist/client/_headers":    "/*\n  X-Frame-Options: DENY\n",
		"dist/client/_redirects":  "/old /new 301\n",
		"dist/client/assets/a.js": "1",
	})
	res, err := Import(Options{Path: dir, AssetsImage: "registry.example/site:1"})
	if err != nil {
		t.Fatal(err)
	}
	want := &v1alpha1.WorkerAssets{
		Image: "registry.example/site:1", Binding: "ASSETS",
		HTMLHandling: v1alpha1.HTMLDropTrailingSlash, NotFoundHandling: v1alpha1.NotFoundSPA,
		RunWorkerFirst: []string{"/api/*", "!/api/docs/*"},
		Headers:        "/*\n  X-Frame-Options: DENY\n", Redirects: "/old /new 301\n",
	}
	if got := res.Worker.Spec.Assets; !reflect.DeepEqual(got, want) {
		t.Errorf("spec.assets = %+v\nwant %+v", got, want)
	}
	if len(res.Unsupported) != 0 {
		t.Errorf("unsupported: %v", res.Unsupported)
	}
}

// run_worker_first true is every path; experimental_serve_directly false (its older
// spelling) too; an unknown html_handling and key are reported with their paths.
func TestImportAssetsKeys(t *testing.T) {
	cases := []struct {
		assets   string
		want     []string
		problems []string
	}{
		{`{"directory": "public", "run_worker_first": true}`, []string{"/*"}, nil},
		{`{"directory": "public", "run_worker_first": false}`, nil, nil},
		{`{"directory": "public", "experimental_serve_directly": false}`, []string{"/*"}, nil},
		{`{"directory": "public", "html_handling": "sometimes", "colour": "red"}`, nil,
			[]string{"assets.colour: " + unknownReason, "assets.html_handling: sometimes is not one of"}},
		{`{"binding": "ASSETS"}`, nil, []string{"assets.directory: required"}},
	}
	for _, c := range cases {
		dir := writeProject(t, map[string]string{
			"wrangler.json": `{"name": "s", "main": "worker.js", "compatibility_date": "2025-10-08", "assets": ` + c.assets + `}`,
			"worker.js":     assetsWorker,
		})
		res, err := Import(Options{Path: dir, AssetsImage: "r.example/s:1", AllowUnsupported: true})
		if err != nil {
			t.Fatalf("%s: %v", c.assets, err)
		}
		var got []string
		if a := res.Worker.Spec.Assets; a != nil {
			got = a.RunWorkerFirst
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: runWorkerFirst %q, want %q", c.assets, got, c.want)
		}
		issues := joinIssues(res.Unsupported)
		for _, p := range c.problems {
			if !strings.Contains(issues, p) {
				t.Errorf("%s: unsupported %q lacks %q", c.assets, issues, p)
			}
		}
		if len(c.problems) == 0 && issues != "" {
			t.Errorf("%s: unsupported %q", c.assets, issues)
		}
	}
}

// Without an image, import says that the assets need one and how to give it.
func TestImportAssetsNeedImage(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.json": `{"name": "s", "main": "worker.js", "compatibility_date": "2025-10-08", "assets": {"directory": "dist"}}`,
		"worker.js":     assetsWorker,
	})
	_, err := Import(Options{Path: dir})
	for _, want := range []string{"static assets", "--image REF", "--assets-image REF", "docs/assets.md"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// A bundle directory that holds the asset directory (wrangler --outdir dist in a Vite
// project whose assets are dist/client) or lies in it (Astro's assets are dist) is refused,
// naming both; one beside it imports.
func TestImportBundleOverlapsAssets(t *testing.T) {
	for _, tc := range []struct {
		assets, bundle string
		refused        bool
	}{
		{"dist/client", "dist", true},
		{"dist", "dist", true},
		{"dist", "dist/_worker.js", true},
		{"dist", ".wrangler/bundle", false},
		{"dist", "distbundle", false},
	} {
		dir := writeProject(t, map[string]string{
			"wrangler.json":           `{"name": "s", "main": "worker.js", "compatibility_date": "2025-10-08", "assets": {"directory": "` + tc.assets + `"}}`,
			"worker.js":               assetsWorker,
			tc.bundle + "/worker.js":  assetsWorker,
			tc.assets + "/index.html": "<p>hi</p>",
		})
		_, err := Import(Options{Path: dir, Bundle: filepath.Join(dir, tc.bundle), AssetsImage: "site:1"})
		overlap := err != nil && strings.Contains(err.Error(), "overlap") && strings.Contains(err.Error(), "docs/deploy.md")
		if overlap != tc.refused {
			t.Errorf("assets %s, bundle %s: error %v, want refused=%v", tc.assets, tc.bundle, err, tc.refused)
		}
	}
}

// With an image source (import --image) and no --assets-image, spec.assets names the
// same image, whose /assets holds the directory.
func TestAssetsImageFromSourceImage(t *testing.T) {
	w := &v1alpha1.Worker{}
	w.Spec.Source.Image = &v1alpha1.ImageSource{Image: "localhost:5001/site@sha256:abc", Main: "index.js"}
	w.Spec.Assets = &v1alpha1.WorkerAssets{}
	r := &Result{Worker: w}
	if err := r.setAssetsImage(""); err != nil {
		t.Fatal(err)
	}
	if w.Spec.Assets.Image != "localhost:5001/site@sha256:abc" || w.Spec.Assets.Path != "" {
		t.Errorf("spec.assets = %+v, want the source image with the default path", w.Spec.Assets)
	}
	if err := r.setAssetsImage("other/assets:2"); err != nil || w.Spec.Assets.Image != "other/assets:2" {
		t.Errorf("--assets-image: %v, spec.assets.image %q", err, w.Spec.Assets.Image)
	}
}

// A project without main but with assets imports as an assets-only Worker (no
// spec.source); one that also binds something is refused.
func TestImportAssetsOnly(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.json":   `{"name": "docs", "compatibility_date": "2025-10-08", "assets": {"directory": "public", "not_found_handling": "404-page"}}`,
		"public/404.html": "nf",
	})
	res, err := Import(Options{Path: dir, AssetsImage: "r.example/docs:1"})
	if err != nil {
		t.Fatal(err)
	}
	src := res.Worker.Spec.Source
	if src.Inline != nil || src.ConfigMap != nil || src.Image != nil {
		t.Errorf("spec.source = %+v, want none", src)
	}
	if a := res.Worker.Spec.Assets; a == nil || a.Image != "r.example/docs:1" || a.NotFoundHandling != v1alpha1.NotFound404Page {
		t.Errorf("spec.assets = %+v", a)
	}
	bound := writeProject(t, map[string]string{
		"wrangler.json": `{"name": "docs", "compatibility_date": "2025-10-08", "vars": {"A": "1"}, "assets": {"directory": "public", "binding": "ASSETS"}}`,
	})
	_, err = Import(Options{Path: bound, AssetsImage: "r.example/docs:1"})
	if err == nil || !strings.Contains(err.Error(), "binding A, assets.binding") {
		t.Errorf("assets-only with bindings: %v", err)
	}
}

// An assets-only project imported with --image packs only the asset directory, and
// spec.assets names that image (re-pointed to the pushed, digest-pinned reference).
func TestImportAssetsOnlyImage(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.json":     `{"name": "docs", "compatibility_date": "2025-10-08", "assets": {"directory": "public"}}`,
		"public/index.html": "hi",
	})
	res, err := Import(Options{Path: dir, Image: "r.example/docs:1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Image == nil || len(res.Image.Modules) != 0 || res.Image.AssetsDir == "" {
		t.Fatalf("image bundle = %+v, want the asset directory alone", res.Image)
	}
	a := res.Worker.Spec.Assets
	if a.Image != "r.example/docs:1" || a.Path != bundleimage.AssetsPath {
		t.Errorf("spec.assets image %q path %q", a.Image, a.Path)
	}
	res.SetImage("r.example/docs@sha256:abc")
	if a.Image != "r.example/docs@sha256:abc" {
		t.Errorf("after SetImage: spec.assets.image %q", a.Image)
	}
	if _, _, err := bundleimage.Build(*res.Image); err != nil {
		t.Errorf("Build: %v", err)
	}
}

// run_worker_first: [] is refused even with --allow-unsupported, as wrangler refuses it
// ("No `run_worker_first` rules were provided; must provide at least 1 rule."):
// https://developers.cloudflare.com/workers/static-assets/binding/#run_worker_first
func TestImportRunWorkerFirstEmpty(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.json": `{"name": "s", "main": "worker.js", "compatibility_date": "2025-10-08", "assets": {"directory": "public", "run_worker_first": []}}`,
		"worker.js":     assetsWorker,
	})
	_, err := Import(Options{Path: dir, AssetsImage: "r.example/s:1", AllowUnsupported: true})
	for _, want := range []string{"assets.run_worker_first", "at least 1 route pattern", "developers.cloudflare.com"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
