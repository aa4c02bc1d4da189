package wrangler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// assetKeys are the keys of wrangler's `assets` the importer maps
// (https://developers.cloudflare.com/workers/wrangler/configuration/#assets).
var assetKeys = []string{"directory", "binding", "html_handling", "not_found_handling", "run_worker_first", "experimental_serve_directly"}

var (
	htmlHandlings     = []string{"auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none"}
	notFoundHandlings = []string{"none", "404-page", "single-page-application"}
)

// assets maps the `assets` table (c.assetsPath) to spec.assets, all but the image,
// which Import sets (AssetsImage); the directory's _headers and _redirects become
// spec.assets.headers and redirects (the files themselves are never served).
func (c *converter) assets(cfg *Config) error {
	path := c.assetsPath
	if path == "" {
		return nil
	}
	m, ok := c.eff.Values["assets"].(map[string]any)
	if !ok {
		c.unsupported(path, "not a table")
		return nil
	}
	c.only(path, m, assetKeys...)
	dir, _ := m["directory"].(string)
	if dir == "" {
		c.unsupported(path+".directory", "required: the directory of the static assets")
		return nil
	}
	a := &v1alpha1.WorkerAssets{Binding: stringOr(m["binding"], "")}
	if s, ok := c.enum(path+".html_handling", m["html_handling"], htmlHandlings); ok {
		a.HTMLHandling = v1alpha1.AssetsHTMLHandling(s)
	}
	if s, ok := c.enum(path+".not_found_handling", m["not_found_handling"], notFoundHandlings); ok {
		a.NotFoundHandling = v1alpha1.AssetsNotFoundHandling(s)
	}
	rwf, err := c.runWorkerFirst(path, m)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	a.RunWorkerFirst = rwf
	rel, err := underProject(c.root, cfg.Dir, dir, path+".directory")
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	dir = filepath.Join(c.root, filepath.FromSlash(rel))
	if real, err := filepath.EvalSymlinks(dir); err == nil && !within(real, c.root) {
		if rr, err := filepath.EvalSymlinks(c.root); err != nil || !within(real, rr) {
			return fmt.Errorf("%s: %s.directory %s is a symbolic link to %s, outside the project %s: import publishes only the project's own files", cfg.File, path, dir, real, c.root)
		}
	}
	c.res.assetsDir = dir
	if _, err := os.Stat(dir); err != nil {
		c.res.Notes = append(c.res.Notes, fmt.Sprintf("%s.directory %s does not exist yet: run the project's build before import, so that its _headers and _redirects are read", path, dir))
	}
	if a.Headers, err = readOptional(filepath.Join(dir, "_headers")); err != nil {
		return err
	}
	if a.Redirects, err = readOptional(filepath.Join(dir, "_redirects")); err != nil {
		return err
	}
	c.res.Worker.Spec.Assets = a
	return nil
}

// enum is v when it is one of values; anything else is reported unsupported.
func (c *converter) enum(path string, v any, values []string) (string, bool) {
	if v == nil {
		return "", false
	}
	s, _ := v.(string)
	if !contains(values, s) {
		c.unsupported(path, fmt.Sprintf("%v is not one of %v", v, values))
		return "", false
	}
	return s, true
}

// runWorkerFirst maps run_worker_first (true is every path, "/*"; a list is kept) and
// the older experimental_serve_directly (false runs the Worker first). An empty list is
// refused, as wrangler refuses it ("must provide at least 1 rule").
func (c *converter) runWorkerFirst(path string, m map[string]any) ([]string, error) {
	switch v := m["run_worker_first"].(type) {
	case nil:
	case bool:
		if v {
			return []string{"/*"}, nil
		}
	case []any:
		if len(v) == 0 {
			return nil, fmt.Errorf("%s.run_worker_first: an empty list has no rules; give at least 1 route pattern, or true or false "+
				"(https://developers.cloudflare.com/workers/static-assets/binding/#run_worker_first)", path)
		}
		var out []string
		for i, p := range v {
			s, ok := p.(string)
			if !ok {
				c.unsupported(fmt.Sprintf("%s.run_worker_first[%d]", path, i), "not a string")
				continue
			}
			out = append(out, s)
		}
		return out, nil
	default:
		c.unsupported(path+".run_worker_first", "neither a boolean nor a list of route patterns")
	}
	if direct, ok := m["experimental_serve_directly"].(bool); ok && !direct {
		return []string{"/*"}, nil
	}
	return nil, nil
}

// readOptional is the file's text, "" when it does not exist.
func readOptional(file string) (string, error) {
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return "", nil
	}
	return string(b), err
}

// setAssetsImage names the image holding the asset directory in spec.assets: ref, else
// the image of spec.source.image (an `import --image` bundle holds the directory under
// /assets; written out, though the API defaults to it, so the YAML says where the
// files are), or says how to get one.
func (r *Result) setAssetsImage(ref string) error {
	a := r.Worker.Spec.Assets
	if a == nil {
		return nil
	}
	if src := r.Worker.Spec.Source.Image; ref == "" && src != nil {
		ref = src.Image
	}
	if ref == "" {
		return fmt.Errorf("assets: the Worker serves static assets from %s, which the pods read from an OCI image: "+
			"pass --image REF (import packs the modules and the directory into it) or --assets-image REF "+
			"(an image you built holding the directory's files under %s); see docs/assets.md", r.assetsDir, v1alpha1.DefaultAssetsPath)
	}
	a.Image = ref
	return nil
}

// checkAssetsOnly refuses what needs a Worker script in a project without main, as
// wrangler does: bindings (vars, secrets, ...), assets.binding and run_worker_first.
func (r *Result) checkAssetsOnly() error {
	s := r.Worker.Spec
	var what []string
	for _, b := range s.Bindings {
		what = append(what, "binding "+b.Name)
	}
	if s.Assets.Binding != "" {
		what = append(what, "assets.binding")
	}
	if len(s.Assets.RunWorkerFirst) > 0 {
		what = append(what, "assets.run_worker_first")
	}
	if len(what) > 0 || len(r.DurableObjectNamespaces) > 0 || len(r.Workflows) > 0 || len(r.CronSchedules) > 0 {
		return fmt.Errorf("no main: an assets-only Worker has no code for %s (or Durable Objects, Workflows, crons)", strings.Join(what, ", "))
	}
	return nil
}
