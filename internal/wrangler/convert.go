package wrangler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Issue is a configuration key the importer did not map: its path in the file
// (e.g. "r2_buckets", "env.staging.services[0].environment") and why.
type Issue struct {
	Path   string
	Reason string
}

func (i Issue) String() string { return i.Path + ": " + i.Reason }

// Result is what a wrangler project maps to.
type Result struct {
	Worker                  *v1alpha1.Worker
	DurableObjectNamespaces []*v1alpha1.DurableObjectNamespace
	Workflows               []*v1alpha1.Workflow
	CronSchedules           []*v1alpha1.CronSchedule
	KVNamespaces            []*v1alpha1.KVNamespace
	D1Databases             []*v1alpha1.D1Database
	Queues                  []*v1alpha1.Queue
	// ConfigMaps hold D1 migrations (d1_databases[].migrations_dir).
	ConfigMaps []*corev1.ConfigMap
	// R2Buckets are written by Import with Options.R2Endpoint.
	R2Buckets []*v1alpha1.R2Bucket
	// Unsupported are the keys that did not map, sorted by path.
	Unsupported []Issue
	// Ignored are keys without effect here (deployment or dashboard settings).
	Ignored []Issue
	// Secret is the Secret the secretKeyRef bindings name ("" if none) and
	// SecretKeys its keys; the importer never reads or writes the values.
	Secret     string
	SecretKeys []string
	// Notes are hints for the user (e.g. a binding to another project's class).
	Notes []string
	// Image is what to pack into the image (Options.Image), nil without it.
	Image *ImageBundle
	// main is the entry module's path from the configuration (relative to the project).
	main string
	// assetsDir is the asset directory (assets.directory, absolute), "" without assets.
	assetsDir string
	// r2 are the buckets r2_buckets binds, in order, once each.
	r2 []r2Bucket
	// containerBuilds are the containers[] entries whose image is a Dockerfile.
	containerBuilds []containerBuild
}

// r2Bucket is an R2Bucket an r2_buckets entry binds: its object name and bucket_name.
type r2Bucket struct{ name, bucket string }

// converter maps one environment's keys into a Result.
type converter struct {
	eff        *Effective
	res        *Result
	name       string
	sqlClasses map[string]bool
	bundled    bool
	// assetsPath is the path of the `assets` key, mapped once the others are (assets.go).
	assetsPath string
	// dir is the configuration's directory (D1 migrations are read relative to it);
	// root the project's, under which every file read must be (paths.go).
	dir, root string
	// generated: the configuration is a build tool's (generatedKeys are ignored).
	generated bool
}

// Convert maps eff (one environment of cfg) to objects without reading any code;
// bundled says whether the modules come from a wrangler bundle (then bundler keys
// are already applied). Objects get namespace ns when it is not "".
func Convert(cfg *Config, eff *Effective, ns string, bundled bool) (*Result, error) {
	c := &converter{eff: eff, res: &Result{}, sqlClasses: map[string]bool{}, bundled: bundled, dir: cfg.Dir, root: cmp.Or(cfg.UserDir, cfg.Dir), generated: cfg.Generated}
	c.name = dnsName(stringOr(eff.Values["name"], filepath.Base(cfg.UserDir)))
	date, ok := eff.Values["compatibility_date"].(string)
	if !ok || date == "" {
		return nil, fmt.Errorf("%s: compatibility_date is required (a YYYY-MM-DD string)", cfg.File)
	}
	w := &v1alpha1.Worker{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Worker"},
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ns},
		Spec:       v1alpha1.WorkerSpec{CompatibilityDate: date},
	}
	c.res.Worker = w
	c.migrations()
	for _, k := range sortedKeys(eff.Values) {
		c.key(k, eff.Paths[k], eff.Values[k])
	}
	c.containers()
	if err := c.secrets(cfg); err != nil {
		return nil, err
	}
	if err := c.assets(cfg); err != nil {
		return nil, err
	}
	for _, o := range c.objects() {
		o.SetNamespace(ns)
	}
	sort.Slice(c.res.Unsupported, func(i, j int) bool { return c.res.Unsupported[i].Path < c.res.Unsupported[j].Path })
	sort.Slice(c.res.Ignored, func(i, j int) bool { return c.res.Ignored[i].Path < c.res.Ignored[j].Path })
	return c.res, nil
}

func (c *converter) objects() []metav1.Object {
	var out []metav1.Object
	for _, d := range c.res.DurableObjectNamespaces {
		out = append(out, d)
	}
	for _, wf := range c.res.Workflows {
		out = append(out, wf)
	}
	for _, cs := range c.res.CronSchedules {
		out = append(out, cs)
	}
	for _, o := range c.res.KVNamespaces {
		out = append(out, o)
	}
	for _, o := range c.res.ConfigMaps {
		out = append(out, o)
	}
	for _, o := range c.res.D1Databases {
		out = append(out, o)
	}
	for _, o := range c.res.Queues {
		out = append(out, o)
	}
	return out
}

// key maps one top-level key.
func (c *converter) key(k, path string, v any) {
	spec := &c.res.Worker.Spec
	switch k {
	case "name", "compatibility_date", "migrations", "secrets":
		// read in Convert, migrations and secrets
	case "main":
		c.res.main, _ = v.(string)
	case "compatibility_flags":
		for i, f := range list(v) {
			if s, ok := f.(string); ok {
				spec.CompatibilityFlags = append(spec.CompatibilityFlags, s)
			} else {
				c.unsupported(fmt.Sprintf("%s[%d]", path, i), "not a string")
			}
		}
	case "vars":
		c.vars(path, v)
	case "durable_objects":
		c.durableObjects(path, v)
	case "workflows":
		c.workflows(path, v)
	case "services":
		c.services(path, v)
	case "kv_namespaces":
		c.kvNamespaces(path, v)
	case "d1_databases":
		c.d1Databases(path, v)
	case "queues":
		c.queues(path, v)
	case "hyperdrive":
		c.hyperdrive(path, v)
	case "r2_buckets":
		c.r2Buckets(path, v)
	case "ai":
		c.ai(path, v)
	case "dispatch_namespaces":
		c.dispatchNamespaces(path, v)
	case "tail_consumers":
		c.tailConsumers(path, v)
	case "triggers":
		c.triggers(path, v)
	case "limits":
		c.limits(path, v)
	case "assets":
		c.assetsPath = path
	case "containers":
		// mapped by containers() once durable_objects made the namespaces
	default:
		c.other(k, path)
	}
}

// other classifies a key the converter does not map. An empty list or table binds
// nothing, whatever its kind.
func (c *converter) other(k, path string) {
	v := c.eff.Values[k]
	switch {
	case c.generated && generatedKeys[k] != "":
		c.res.Ignored = append(c.res.Ignored, Issue{path, generatedKeys[k]})
	case isEmptyList(v) && ignoredKeys[k] == "":
		c.res.Ignored = append(c.res.Ignored, Issue{path, "empty"})
	case ignoredKeys[k] != "":
		c.res.Ignored = append(c.res.Ignored, Issue{path, ignoredKeys[k]})
	case bundlerKeys[k] && c.bundled:
		c.res.Ignored = append(c.res.Ignored, Issue{path, "applied by wrangler when it bundled --bundle"})
	case bundlerKeys[k]:
		c.unsupported(path, bundlerReason)
	case unsupportedKeys[k] != "":
		c.unsupported(path, unsupportedKeys[k])
	default:
		c.unsupported(path, unknownReason)
	}
}

func (c *converter) unsupported(path, reason string) {
	c.res.Unsupported = append(c.res.Unsupported, Issue{path, reason})
}

// only reports every key of m not in known as unsupported.
func (c *converter) only(path string, m map[string]any, known ...string) {
	for _, k := range sortedKeys(m) {
		if !contains(known, k) {
			c.unsupported(path+"."+k, unknownReason)
		}
	}
}

func (c *converter) addBinding(b v1alpha1.Binding) {
	spec := &c.res.Worker.Spec
	for i := range spec.Bindings {
		if spec.Bindings[i].Name == b.Name {
			spec.Bindings[i] = b
			return
		}
	}
	spec.Bindings = append(spec.Bindings, b)
}

// vars become text bindings (strings) or json bindings (anything else).
func (c *converter) vars(path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		c.unsupported(path, "not a table of variables")
		return
	}
	for _, k := range sortedKeys(m) {
		b := v1alpha1.Binding{Name: k}
		if s, ok := m[k].(string); ok {
			b.Text = &s
		} else {
			raw, err := json.Marshal(m[k])
			if err != nil {
				c.unsupported(path+"."+k, "value has no JSON form: "+err.Error())
				continue
			}
			s := string(raw)
			b.JSON = &s
		}
		c.addBinding(b)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func list(v any) []any {
	switch l := v.(type) {
	case []any:
		return l
	case []map[string]any: // TOML arrays of tables
		out := make([]any, len(l))
		for i := range l {
			out[i] = l[i]
		}
		return out
	}
	return nil
}

func stringOr(v any, def string) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return def
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// joinIssues formats issues one per line.
func joinIssues(is []Issue) string {
	lines := make([]string, len(is))
	for i, x := range is {
		lines[i] = x.String()
	}
	return strings.Join(lines, "\n")
}
