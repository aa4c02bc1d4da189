package wrangler

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// assets maps wrangler's `assets` table
// (https://developers.cloudflare.com/workers/static-assets/binding/) to spec.assets:
// binding, html_handling, not_found_handling and run_worker_first (true is every path,
// "/*"). directory is what `import --image` packs into the image, which spec.assets.image
// then names (useImage).
func (c *converter) assets(path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		c.unsupported(path, "not a table")
		return
	}
	a := &v1alpha1.WorkerAssets{}
	c.res.assetsDir, _ = m["directory"].(string)
	if c.res.assetsDir == "" {
		c.unsupported(path+".directory", "required: the directory of the static assets")
	}
	a.Binding, _ = m["binding"].(string)
	if s, ok := m["html_handling"].(string); ok {
		a.HTMLHandling = v1alpha1.AssetsHTMLHandling(s)
	}
	if s, ok := m["not_found_handling"].(string); ok {
		a.NotFoundHandling = v1alpha1.AssetsNotFoundHandling(s)
	}
	switch r := m["run_worker_first"].(type) {
	case nil:
	case bool:
		if r {
			a.RunWorkerFirst = []string{"/*"}
		}
	default:
		for i, p := range list(r) {
			if s, ok := p.(string); ok {
				a.RunWorkerFirst = append(a.RunWorkerFirst, s)
			} else {
				c.unsupported(fmt.Sprintf("%s.run_worker_first[%d]", path, i), "not a string")
			}
		}
	}
	c.only(path, m, "directory", "binding", "html_handling", "not_found_handling", "run_worker_first")
	c.res.Worker.Spec.Assets = a
}

// assetFiles reads _headers and _redirects from the asset directory into spec.assets
// (the files themselves are not served, as on Cloudflare).
func assetFiles(a *v1alpha1.WorkerAssets, dir string) error {
	for name, field := range map[string]*string{"_headers": &a.Headers, "_redirects": &a.Redirects} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		*field = string(b)
	}
	return nil
}
