package e2e

import (
	"context"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/hack/ociimage"
	"github.com/workerd-operator/workerd-operator/internal/devcluster"
)

// assetsImage holds the site of TestAssetsServe: an SPA shell and its script under /site.
const assetsImage = "localhost/workerd-operator/e2e-assets:1"

const (
	siteIndex  = "<!doctype html><div id=root></div><script src=/assets/app.js></script>\n"
	siteScript = "document.getElementById('root').textContent = 'app';\n"
)

// assetsImageVolume writes the assets image as an archive into dir and returns its
// image-volume mapping entry.
func assetsImageVolume(dir string) (devcluster.ImageDirectory, error) {
	img := &ociimage.Image{Ref: assetsImage, Layers: [][]ociimage.File{{
		{Path: "/site", Dir: true, Mode: 0o755},
		{Path: "/site/index.html", Mode: 0o644, Data: []byte(siteIndex)},
		{Path: "/site/assets", Dir: true, Mode: 0o755},
		{Path: "/site/assets/app.js", Mode: 0o644, Data: []byte(siteScript)},
	}}}
	archive := filepath.Join(dir, "assets.tar")
	if err := img.WriteArchive(archive); err != nil {
		return devcluster.ImageDirectory{}, err
	}
	return devcluster.ImageDirectory{Image: strings.TrimSuffix(assetsImage, ":1"), Archive: archive}, nil
}

// TestAssetsServe: a Worker with spec.assets from an image volume serves, through its
// Service, the SPA's index.html on / and on a client-side route, its script with a
// JavaScript content type, and /api/ from the Worker (run_worker_first), as Cloudflare
// serves a single-page application
// (https://developers.cloudflare.com/workers/static-assets/routing/single-page-application/).
func TestAssetsServe(t *testing.T) {
	ctx := context.Background()
	worker := `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/api/shell") {
      const shell = await env.ASSETS.fetch(new URL("/", url));
      return Response.json({ shell: shell.status });
    }
    return Response.json({ api: url.pathname });
  },
};
`
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.workerd-operator.io/v1alpha1",
		"kind":       "Worker",
		"metadata":   map[string]any{"name": "assets-site", "namespace": sampleNS},
		"spec": map[string]any{
			"compatibilityDate": "2025-10-08",
			"source": map[string]any{"inline": map[string]any{"modules": []any{
				map[string]any{"name": "worker.js", "type": "ESModule", "content": worker},
			}}},
			"assets": map[string]any{
				"image": assetsImage, "path": "/site", "pullPolicy": "IfNotPresent", "binding": "ASSETS",
				"notFoundHandling": "single-page-application", "runWorkerFirst": []any{"/api/*"},
			},
		},
	}}
	if err := cluster.Apply(ctx, []*unstructured.Unstructured{w}, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	if err := cluster.WaitReady(ctx, []*unstructured.Unstructured{w}, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	url := serviceURL(t, "assets-site")
	var body string
	eventually(t, time.Minute, "GET assets-site /", func() (err error) {
		body, err = get(url + "/")
		return err
	})
	if body != siteIndex {
		t.Errorf("GET /: %q, want index.html %q", body, siteIndex)
	}
	checks := []struct {
		path, body, mimeType string
	}{
		{"/settings/profile", siteIndex, "text/html"},              // a client-side route: the SPA shell
		{"/assets/app.js", siteScript, "text/javascript"},          // the script, typed by extension
		{"/api/users", `{"api":"/api/users"}`, "application/json"}, // the Worker first
		{"/api/shell", `{"shell":200}`, "application/json"},        // the assets binding
	}
	for _, c := range checks {
		res := navigate(t, url+c.path)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
		if res.StatusCode != http.StatusOK || string(b) != c.body || mt != c.mimeType {
			t.Errorf("GET %s: %d %s %q, want 200 %s %q", c.path, res.StatusCode, mt, b, c.mimeType, c.body)
		}
	}
}

// navigate GETs url as a browser navigation does (Sec-Fetch-Mode: navigate).
func navigate(t *testing.T, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
