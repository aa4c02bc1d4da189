package wrangler

import (
	"reflect"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// TestImportImageAssets: with --image the Worker's source and assets name the image;
// wrangler's assets keys map to spec.assets (run_worker_first true is every path), the
// _headers and _redirects files become its text, and unknown assets keys are listed.
// Without --image, assets are listed as needing it.
// https://developers.cloudflare.com/workers/static-assets/binding/
func TestImportImageAssets(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.json": `{"name": "site", "main": "src/index.ts", "compatibility_date": "2025-06-01",
			"assets": {"directory": "./public", "binding": "ASSETS", "html_handling": "drop-trailing-slash",
			"not_found_handling": "404-page", "run_worker_first": true}}`,
		"public/index.html": "<p>hi</p>",
		"public/_headers":   "/*\n  X-Site: 1\n",
		"public/_redirects": "/old /new 301\n",
		"bundle/index.js":   "export default {}",
		"bundle/lib/a.js":   "export const a = 1",
	})
	res, err := Import(Options{Path: dir, Bundle: dir + "/bundle", Image: "localhost:5001/site:1"})
	if err != nil {
		t.Fatal(err)
	}
	want := &v1alpha1.WorkerAssets{Image: "localhost:5001/site:1", Path: "/assets", PullPolicy: "IfNotPresent", Binding: "ASSETS",
		HTMLHandling: "drop-trailing-slash", NotFoundHandling: "404-page", RunWorkerFirst: []string{"/*"},
		Headers: "/*\n  X-Site: 1\n", Redirects: "/old /new 301\n"}
	if !reflect.DeepEqual(res.Worker.Spec.Assets, want) {
		t.Errorf("assets %+v\nwant %+v", res.Worker.Spec.Assets, want)
	}
	src := res.Worker.Spec.Source
	if src.Inline != nil || src.Image == nil || src.Image.Main != "index.js" || len(src.Image.Modules) != 2 {
		t.Errorf("source %+v, want image only with index.js and lib/a.js", src)
	}
	if res.Image == nil || res.Image.AssetsDir != dir+"/public" || res.Image.AssetsConfig["directory"] != nil || res.Image.AssetsConfig["binding"] != "ASSETS" {
		t.Errorf("image bundle %+v, want the public directory and the config without directory", res.Image)
	}
	res.SetImage("localhost:5001/site@sha256:00")
	if res.Worker.Spec.Assets.Image != "localhost:5001/site@sha256:00" || src.Image.Image != "localhost:5001/site@sha256:00" {
		t.Errorf("SetImage did not reach both the source and the assets")
	}

	_, err = Import(Options{Path: dir, Bundle: dir + "/bundle"})
	if err == nil || !strings.Contains(err.Error(), "assets: static assets go into an OCI image: pass --image REF") {
		t.Errorf("without --image: %v, want assets listed as needing --image", err)
	}
	dir2 := writeProject(t, map[string]string{
		"wrangler.json":   `{"name": "s", "main": "i.js", "compatibility_date": "2025-06-01", "assets": {"directory": "d", "experimental_serve_directly": true}}`,
		"bundle/index.js": "export default {}",
	})
	_, err = Import(Options{Path: dir2, Bundle: dir2 + "/bundle", Image: "localhost:5001/s:1"})
	if err == nil || !strings.Contains(err.Error(), "assets.experimental_serve_directly") {
		t.Errorf("unknown assets key: %v, want it listed", err)
	}
}
