package chart

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Dir is the chart's directory relative to the repository root.
const Dir = "charts/workerd-operator"

// Load reads the chart from <repoRoot>/charts/workerd-operator.
func Load(repoRoot string) (*chart.Chart, error) {
	c, err := loader.Load(filepath.Join(repoRoot, Dir))
	if err != nil {
		return nil, fmt.Errorf("chart: load %s: %w", Dir, err)
	}
	return c, nil
}

// Render renders the chart for a release named release in namespace with the given
// values (merged over values.yaml; nil: the defaults), validating them against
// values.schema.json first, and returns the objects in Helm's install order (CRDs,
// namespaced and cluster RBAC, Services, Deployments, ..., webhook configurations last).
// NOTES.txt is not an object and is dropped. Errors: schema violations (Helm's message
// names the value path, e.g. "at '/replicaCount': got string, want integer"), template
// failures (`fail` messages of the chart name the value), and YAML that is not objects.
func Render(c *chart.Chart, release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(c, values, opts, chartutil.DefaultCapabilities, false)
	if err != nil {
		return nil, fmt.Errorf("chart: values: %w", err)
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("chart: render: %w", err)
	}
	var docs []string
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if filepath.Ext(name) != ".yaml" {
			continue
		}
		m := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			docs = append(docs, m[k])
		}
	}
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(d)), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if err == io.EOF {
					break
				}
				return nil, fmt.Errorf("chart: rendered YAML: %w\n%s", err, d)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	sort.SliceStable(objs, func(i, j int) bool { return installRank(objs[i]) < installRank(objs[j]) })
	return objs, nil
}

// installRank orders kinds as Helm's install does (releaseutil.InstallOrder), unknown kinds
// after the known ones.
func installRank(u *unstructured.Unstructured) int {
	for i, k := range releaseutil.InstallOrder {
		if k == u.GetKind() {
			return i
		}
	}
	return len(releaseutil.InstallOrder)
}
