package bundleimage

import (
	"reflect"
	"sort"
	"testing"
)

// TestAssetsIgnoreDoubleStar: .assetsignore is gitignore's format
// (https://developers.cloudflare.com/workers/static-assets/binding/#ignoring-assets,
// https://git-scm.com/docs/gitignore#_pattern_format): "**/" matches in every
// directory, the top included, and a trailing "/**" everything inside. wrangler's own
// three (.assetsignore, _headers, _redirects) are left out at the top only. A file the
// project meant to keep out (a key, an env file) must not reach the image.
func TestAssetsIgnoreDoubleStar(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		".assetsignore":         "**/*.env\nprivate/**\nkeys/**/*.pem\n",
		"index.html":            "kept",
		"prod.env":              "TOKEN=1",
		"nested/dev.env":        "TOKEN=2",
		"private/a/b/secret":    "s",
		"private/top":           "s",
		"keys/tls.pem":          "k",
		"keys/deep/er/tls.pem":  "k",
		"keys/readme.txt":       "kept",
		"other/private/ok.html": "kept: private/** is anchored at the top",
		"blog/_headers":         "kept: only the top's _headers is configuration",
	}
	writeTree(t, dir, files)
	tr, _, err := assetTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for p := range tr.files {
		got = append(got, p)
	}
	sort.Strings(got)
	want := []string{"/assets/blog/_headers", "/assets/index.html", "/assets/keys/readme.txt", "/assets/other/private/ok.html"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("image holds %v, want %v", got, want)
	}
}

// TestAssetsPagesWorker: like wrangler (errorOnLegacyPagesWorkerJSAsset in workers-sdk
// packages/wrangler/src/assets.ts), a Pages _worker.js file or directory in the asset
// directory is refused unless an .assetsignore exists (an empty one publishes it).
func TestAssetsPagesWorker(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		err   bool
	}{
		{"file", map[string]string{"index.html": "x", "_worker.js": "export default {}"}, true},
		{"directory", map[string]string{"_worker.js/index.js": "export default {}"}, true},
		{"ignored", map[string]string{".assetsignore": "_worker.js\n", "_worker.js": "export default {}"}, false},
		{"empty ignore file", map[string]string{".assetsignore": "", "_worker.js": "export default {}"}, false},
		{"nested", map[string]string{"docs/_worker.js": "text"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			_, _, err := assetTree(dir)
			if tc.err != (err != nil) {
				t.Fatalf("err = %v, want error: %v", err, tc.err)
			}
		})
	}
}
