package wrangler

import (
	"reflect"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// TestImportImageAssets: with --image the Worker's source and spec.assets name the
// image (the modules under /bundle, the asset directory under /assets, the
// configuration without its local directory in the manifest); --assets-image keeps the
// assets in an image of the user's own.
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

	// An image of the user's own for the assets keeps them out of the bundle image.
	res, err = Import(Options{Path: dir, Bundle: dir + "/bundle", Image: "localhost:5001/site:1", AssetsImage: "r.example/files:2"})
	if err != nil {
		t.Fatal(err)
	}
	res.SetImage("localhost:5001/site@sha256:00")
	if res.Image.AssetsDir != "" || res.Worker.Spec.Assets.Image != "r.example/files:2" {
		t.Errorf("with --assets-image: packed %q, assets.image %q; want nothing packed and r.example/files:2", res.Image.AssetsDir, res.Worker.Spec.Assets.Image)
	}
}
