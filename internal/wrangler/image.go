package wrangler

import (
	"encoding/base64"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/bundleimage"
)

// ImageBundle is what `import --image` packs into the image (bundleimage.Build).
type ImageBundle = bundleimage.Bundle

// useImage points the Worker's source at the image o.Image (modules under
// bundleimage.ModulesPath, listed with their types) instead of inline modules, and
// returns what goes into the image: the modules' bytes and, unless o.AssetsImage names
// another image, the asset directory, which spec.assets then finds under
// bundleimage.AssetsPath (setAssetsImage names the image).
func useImage(res *Result, eff *Effective, o Options, mods []v1alpha1.Module) (*ImageBundle, error) {
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
		Image: o.Image, Path: bundleimage.ModulesPath, Main: mods[0].Name, Modules: list, PullPolicy: corev1.PullIfNotPresent,
	}}
	packAssets(b, res, eff, o)
	return b, nil
}

// useAssetsImage is useImage for an assets-only project: the image holds only the
// asset directory.
func useAssetsImage(res *Result, eff *Effective, o Options) *ImageBundle {
	b := &ImageBundle{}
	packAssets(b, res, eff, o)
	if b.AssetsDir != "" {
		res.Worker.Spec.Assets.Image = o.Image
	}
	return b
}

// packAssets puts the asset directory into b unless o.AssetsImage names another image;
// spec.assets then finds it under bundleimage.AssetsPath.
func packAssets(b *ImageBundle, res *Result, eff *Effective, o Options) {
	a := res.Worker.Spec.Assets
	if a == nil || o.AssetsImage != "" || res.assetsDir == "" {
		return
	}
	a.Path, a.PullPolicy = bundleimage.AssetsPath, corev1.PullIfNotPresent
	b.AssetsDir = res.assetsDir
	b.AssetsConfig = map[string]any{}
	cfg, _ := eff.Values["assets"].(map[string]any)
	for k, v := range cfg {
		if k != "directory" { // a path of this machine
			b.AssetsConfig[k] = v
		}
	}
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SetImage replaces the image reference the Worker's source names, and spec.assets
// where it names the same image (or, assets-only, the one it names), e.g. by the digest-pinned one once the image is pushed.
func (r *Result) SetImage(ref string) {
	src := r.Worker.Spec.Source.Image
	if src == nil {
		if a := r.Worker.Spec.Assets; a != nil && a.Image != "" {
			a.Image = ref // an assets-only Worker
		}
		return
	}
	if a := r.Worker.Spec.Assets; a != nil && a.Image == src.Image {
		a.Image = ref
	}
	src.Image = ref
}
