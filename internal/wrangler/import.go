package wrangler

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// UnsupportedAnnotation is set on an imported Worker (with --allow-unsupported) to the
// configuration keys that did not map, one "path: reason" per line.
const UnsupportedAnnotation = "fleet.workerd-operator.io/import-unsupported"

// Options configure Import.
type Options struct {
	// Path is the project directory or its wrangler.json/.jsonc/.toml.
	Path string
	// Env selects an [env.NAME] section; "" is the top level.
	Env string
	// Bundle is a directory written by `wrangler deploy --dry-run --outdir`; every file
	// in it becomes an inline module. "" reads main as the only module.
	Bundle string
	// Namespace of the objects; "" leaves it to kubectl.
	Namespace string
	// AssetsImage is the image holding the asset directory (spec.assets.image), for a
	// project with `assets`; import fails without one, saying how to get one.
	AssetsImage string
	// AllowUnsupported imports despite unsupported keys (listed in the Worker's
	// UnsupportedAnnotation).
	AllowUnsupported bool
	// Image, when set, makes spec.source.image name this reference instead of inline
	// modules; Result.Image holds what to pack into it (the modules, the assets).
	Image string
	// R2Endpoint is the S3-compatible store the R2Buckets of r2_buckets get as
	// spec.s3.endpoint; "" writes no R2Bucket (a note says to create them).
	R2Endpoint string
	// DispatchNamespace makes the Worker a user Worker of that dispatch namespace
	// (spec.dispatchNamespace), as wrangler deploy --dispatch-namespace uploads it into
	// one (docs/dispatch.md).
	DispatchNamespace string
	// ContainerImages names the built image of each class whose containers[].image is
	// a Dockerfile (class name → image reference).
	ContainerImages map[string]string
}

// UnsupportedError lists the keys that did not map.
type UnsupportedError struct {
	File   string
	Issues []Issue
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: %d key(s) cannot be mapped (pass --allow-unsupported to import without them):\n  %s",
		e.File, len(e.Issues), strings.ReplaceAll(joinIssues(e.Issues), "\n", "\n  "))
}

// Import reads a wrangler project and returns its objects. Unsupported keys are an
// *UnsupportedError unless o.AllowUnsupported; code that cannot be read as is names
// --bundle.
func Import(o Options) (*Result, error) {
	cfg, err := Load(o.Path)
	if err != nil {
		return nil, err
	}
	eff, err := cfg.Environment(o.Env)
	if err != nil {
		return nil, err
	}
	res, err := Convert(cfg, eff, o.Namespace, o.Bundle != "")
	if err != nil {
		return nil, err
	}
	if err := res.userWorker(cfg.File, o.DispatchNamespace); err != nil {
		return nil, err
	}
	if err := res.SetContainerImages(cfg.File, o.ContainerImages); err != nil {
		return nil, err
	}
	if len(res.Unsupported) > 0 && !o.AllowUnsupported {
		return nil, &UnsupportedError{File: cfg.File, Issues: res.Unsupported}
	}
	if res.main == "" && res.Worker.Spec.Assets != nil {
		// An assets-only project: no code (docs/assets.md).
		if err := res.checkAssetsOnly(); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.File, err)
		}
		if o.Image != "" && o.AssetsImage == "" {
			res.Image = useAssetsImage(res, eff, o)
			return res, nil
		}
		return res, res.setAssetsImage(o.AssetsImage)
	}
	var mods []v1alpha1.Module
	if o.Bundle != "" {
		if err := checkBundleBesideAssets(o.Bundle, res.assetsDir); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.File, err)
		}
		mods, err = BundleModules(o.Bundle, res.main)
	} else {
		var m v1alpha1.Module
		m, err = MainModule(cfg.Dir, res.main)
		mods = []v1alpha1.Module{m}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	res.Worker.Spec.Source.Inline = &v1alpha1.InlineSource{Modules: mods}
	if o.Image != "" {
		if res.Image, err = useImage(res, eff, o, mods); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.File, err)
		}
	}
	res.addR2Buckets(o.R2Endpoint, o.Namespace)
	if len(res.Unsupported) > 0 {
		res.Worker.Annotations = map[string]string{UnsupportedAnnotation: joinIssues(res.Unsupported)}
	}
	if err := res.setAssetsImage(o.AssetsImage); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return res, nil
}

// Objects returns the Worker and its companions, in apply order: first what the
// Worker's bindings name and nothing refers back from (ConfigMaps, KVNamespaces,
// D1Databases, Queues, R2Buckets), so its bindings resolve at once; then the Worker;
// then what names the Worker (DurableObjectNamespaces, Workflows, CronSchedules).
func (r *Result) Objects() []any {
	var out []any
	for _, o := range r.ConfigMaps {
		out = append(out, o)
	}
	for _, o := range r.KVNamespaces {
		out = append(out, o)
	}
	for _, o := range r.D1Databases {
		out = append(out, o)
	}
	for _, o := range r.Queues {
		out = append(out, o)
	}
	for _, b := range r.R2Buckets {
		out = append(out, b)
	}
	out = append(out, r.Worker)
	for _, d := range r.DurableObjectNamespaces {
		out = append(out, d)
	}
	for _, w := range r.Workflows {
		out = append(out, w)
	}
	for _, c := range r.CronSchedules {
		out = append(out, c)
	}
	return out
}

// Unstructured returns Objects as unstructured objects, in apply order.
func (r *Result) Unstructured() ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, obj := range r.Objects() {
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(b, &u.Object); err != nil {
			return nil, err
		}
		delete(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		objs = append(objs, u)
	}
	return objs, nil
}

// addR2Buckets writes an R2Bucket per bucket the bindings name, on endpoint, with the
// credentials Secret "<name>-s3"; without an endpoint a note says to create them.
func (r *Result) addR2Buckets(endpoint, ns string) {
	for _, rb := range r.r2 {
		if endpoint == "" {
			r.Notes = append(r.Notes, fmt.Sprintf("R2Bucket %s (bucket %s) is not written: pass --r2-endpoint, or create it with spec.s3 (docs/r2.md)", rb.name, rb.bucket))
			continue
		}
		r.R2Buckets = append(r.R2Buckets, &v1alpha1.R2Bucket{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "R2Bucket"},
			ObjectMeta: metav1.ObjectMeta{Name: rb.name, Namespace: ns},
			Spec: v1alpha1.R2BucketSpec{S3: v1alpha1.S3BucketSource{
				Endpoint: endpoint, Bucket: rb.bucket, CredentialsSecret: v1alpha1.LocalObjectReference{Name: rb.name + "-s3"},
			}},
		})
		r.Notes = append(r.Notes, fmt.Sprintf("R2Bucket %s: create the Secret %s-s3 with the keys %s and %s", rb.name, rb.name, v1alpha1.R2AccessKeyIDKey, v1alpha1.R2SecretAccessKeyKey))
	}
}

// manifest renders one object as YAML without status and empty metadata fields.
func manifest(obj any) (kind, name string, data []byte, err error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return "", "", nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", "", nil, err
	}
	delete(m, "status")
	meta, _ := m["metadata"].(map[string]any)
	delete(meta, "creationTimestamp")
	data, err = yaml.Marshal(m)
	kind, _ = m["kind"].(string)
	name, _ = meta["name"].(string)
	return kind, name, data, err
}

// WriteYAML writes the objects as one multi-document YAML stream.
func (r *Result) WriteYAML(w io.Writer) error {
	for i, obj := range r.Objects() {
		_, _, data, err := manifest(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// WriteDir writes one file per object ("<kind>-<name>.yaml", lowercase) and a
// kustomization.yaml listing them, and returns the file names.
func (r *Result) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, obj := range r.Objects() {
		kind, name, data, err := manifest(obj)
		if err != nil {
			return nil, err
		}
		f := strings.ToLower(kind) + "-" + name + ".yaml"
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
	for _, f := range files {
		k += "  - " + f + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	return append(files, "kustomization.yaml"), nil
}

// checkBundleBesideAssets refuses a --bundle directory that holds the asset directory or
// lies in it (wrangler --outdir dist in a Vite or Astro project): every asset would become
// a module, or the bundle would be served as assets.
func checkBundleBesideAssets(bundle, assetsDir string) error {
	if assetsDir == "" {
		return nil
	}
	b, err := filepath.Abs(bundle)
	if err != nil {
		return err
	}
	if within(b, assetsDir) || within(assetsDir, b) {
		return fmt.Errorf("--bundle %s and the assets directory %s (assets.directory) overlap: write the bundle elsewhere, "+
			"e.g. wrangler deploy --dry-run --outdir .wrangler/bundle and --bundle .wrangler/bundle (docs/deploy.md#code)", bundle, assetsDir)
	}
	return nil
}
