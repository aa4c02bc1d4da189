// Package bundleimage packs a Worker bundle (every module of a `wrangler deploy
// --dry-run --outdir` directory), its static assets and a small manifest into an OCI
// image, without a container engine (go-containerregistry), and pushes it or writes it
// as an OCI image layout archive. `workerd-operator import --image` uses it; the image
// is what spec.source.image and spec.assets.image mount (docs/deploy.md).
//
// Layout of the image (one layer for the code and the manifest, one for the assets, so
// a code change does not upload the assets again):
//
//	/workerd-bundle.json   the Manifest
//	/bundle/<module>       every module, by its name
//	/assets/<file>         the asset directory, without what wrangler never uploads
//
// The image is reproducible: entries are sorted, every timestamp is the Unix epoch and
// owners are 0, so the same bundle gives the same digest on every machine.
package bundleimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Paths inside the image.
const (
	ManifestPath = "/workerd-bundle.json"
	ModulesPath  = "/bundle"
	AssetsPath   = "/assets"
)

// ManifestVersion is the format version of the Manifest this package writes.
const ManifestVersion = 1

// Manifest describes the image: what spec.source.image.modules and spec.assets say,
// kept beside the files so that the image explains itself.
type Manifest struct {
	// Version of the format (ManifestVersion).
	Version int `json:"version"`
	// ModulesPath is the directory of the modules (spec.source.image.path).
	ModulesPath string `json:"modulesPath,omitempty"`
	// Main is the entry module, Modules every module with its type, main first.
	Main    string                 `json:"main,omitempty"`
	Modules []v1alpha1.ImageModule `json:"modules,omitempty"`
	// Assets is set when the image holds static assets.
	Assets *ManifestAssets `json:"assets,omitempty"`
}

// ManifestAssets is the asset directory of the image and its configuration.
type ManifestAssets struct {
	// Path of the directory (spec.assets.path).
	Path string `json:"path"`
	// Files is the number of files in it.
	Files int `json:"files"`
	// Config is the wrangler `assets` configuration the project set (binding,
	// html_handling, not_found_handling, run_worker_first), without directory.
	Config map[string]any `json:"config,omitempty"`
}

// Module is one module of the bundle with its bytes.
type Module struct {
	Name string
	Type v1alpha1.ModuleType
	Data []byte
}

// Bundle is what goes into the image.
type Bundle struct {
	// Modules, the entry module first.
	Modules []Module
	// AssetsDir is the project's asset directory ("" for none).
	AssetsDir string
	// AssetsConfig is the wrangler assets configuration for the manifest.
	AssetsConfig map[string]any
}

// epoch is the time of every entry and of the image config.
var epoch = time.Unix(0, 0).UTC()

// Build assembles the image of b and returns it with its manifest.
func Build(b Bundle) (v1.Image, *Manifest, error) {
	if len(b.Modules) == 0 && b.AssetsDir == "" {
		return nil, nil, fmt.Errorf("bundleimage: no modules and no assets")
	}
	m := &Manifest{Version: ManifestVersion}
	if len(b.Modules) > 0 { // none for an assets-only Worker
		m.ModulesPath, m.Main = ModulesPath, b.Modules[0].Name
	}
	code := newTree()
	for _, mod := range b.Modules {
		m.Modules = append(m.Modules, v1alpha1.ImageModule{Name: mod.Name, Type: mod.Type})
		code.add(path.Join(ModulesPath, mod.Name), mod.Data)
	}
	layers := []*tree{code}
	if b.AssetsDir != "" {
		assets, n, err := assetTree(b.AssetsDir)
		if err != nil {
			return nil, nil, err
		}
		m.Assets = &ManifestAssets{Path: AssetsPath, Files: n, Config: b.AssetsConfig}
		layers = append(layers, assets)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	code.add(ManifestPath, append(data, '\n'))
	img, err := assemble(layers)
	return img, m, err
}

// assemble makes an OCI image (linux/amd64 config, no entrypoint: it is only mounted)
// of one layer per tree.
func assemble(trees []*tree) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, t := range trees {
		raw := t.tar()
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(raw)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, err
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: epoch}
	for i := range cfg.History {
		cfg.History[i].Created = v1.Time{Time: epoch}
	}
	return mutate.ConfigFile(img, cfg)
}

// tree is the files of one layer by absolute path.
type tree struct{ files map[string][]byte }

func newTree() *tree { return &tree{files: map[string][]byte{}} }

func (t *tree) add(p string, data []byte) { t.files[p] = data }

// tar writes the tree as a tar stream: every parent directory, then the files, sorted,
// with fixed times, modes and owners.
func (t *tree) tar() []byte {
	dirs := map[string]bool{}
	var names []string
	for p := range t.files {
		names = append(names, p)
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		h := &tar.Header{Name: p[1:], ModTime: epoch, Format: tar.FormatPAX}
		if dirs[p] {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			_ = tw.WriteHeader(h)
			continue
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(t.files[p]))
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(t.files[p])
	}
	_ = tw.Close()
	return buf.Bytes()
}
