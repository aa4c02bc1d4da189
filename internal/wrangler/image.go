package wrangler

import (
	"encoding/base64"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/bundleimage"
)

// ImageBundle is what `import --image` packs into the image (bundleimage.Build).
type ImageBundle = bundleimage.Bundle

// useImage points the Worker's source at the image ref (modules under
// bundleimage.ModulesPath, listed with their types) instead of inline modules, and
// returns what goes into the image: the modules' bytes and the project's asset
// directory (wrangler's assets.directory, relative to the configuration file), which
// spec.assets then names.
func useImage(res *Result, cfg *Config, eff *Effective, ref string, mods []v1alpha1.Module) (*ImageBundle, error) {
	b := &ImageBundle{}
	list := make([]v1alpha1.ImageModule, 0, len(mods))
	for _, m := range mods {
		data := []byte(ptrOr(m.Content))
		if m.ContentBase64 != nil {
			var err error
			if data, err = base64.StdEncoding.DecodeString(*m.ContentBase64); err != nil {
				return nil, err
			}
		}
		b.Modules = append(b.Modules, bundleimage.Module{Name: m.Name, Type: m.Type, Data: data})
		list = append(list, v1alpha1.ImageModule{Name: m.Name, Type: m.Type})
	}
	res.Worker.Spec.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{
		Image: ref, Path: bundleimage.ModulesPath, Main: mods[0].Name, Modules: list, PullPolicy: corev1.PullIfNotPresent,
	}}
	if a := res.Worker.Spec.Assets; a != nil && res.assetsDir != "" {
		dir := res.assetsDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cfg.Dir, dir)
		}
		if err := assetFiles(a, dir); err != nil {
			return nil, err
		}
		a.Image, a.Path, a.PullPolicy = ref, bundleimage.AssetsPath, corev1.PullIfNotPresent
		b.AssetsDir = dir
		b.AssetsConfig = map[string]any{}
		for k, v := range eff.Values["assets"].(map[string]any) {
			if k != "directory" { // a path of this machine
				b.AssetsConfig[k] = v
			}
		}
	}
	return b, nil
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SetImage replaces the image reference the Worker's source (and assets) name, e.g. by
// the digest-pinned one once the image is pushed.
func (r *Result) SetImage(ref string) {
	if src := r.Worker.Spec.Source.Image; src != nil {
		src.Image = ref
	}
	if a := r.Worker.Spec.Assets; a != nil {
		a.Image = ref
	}
}
