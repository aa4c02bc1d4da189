// Package localrun runs rendered Workers outside a cluster: it decodes manifests,
// renders every Worker in them as the controller would, writes the files a pod would
// see and starts the pinned workerd on them on loopback, for `workerd-operator render`
// and tests. internal/render stays pure; everything that touches files, processes or
// YAML lives here.
package localrun

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Manifests are the objects of one or more multi-document YAML (or JSON) streams that
// matter to the renderer. Other kinds are kept in Others (raw, one per document).
type Manifests struct {
	Workers    []*v1alpha1.Worker
	ConfigMaps []*corev1.ConfigMap
	Secrets    []*corev1.Secret
	Others     [][]byte
}

// DecodeManifests reads a multi-document YAML stream; source names it in errors
// (e.g. the file name). Documents without apiVersion/kind are an error; empty
// documents are skipped.
func DecodeManifests(r io.Reader, source string, into *Manifests) error {
	y := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for i := 0; ; i++ {
		doc, err := y.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i+1, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i+1, err)
		}
		switch {
		case meta.Kind == "Worker" && strings.HasPrefix(meta.APIVersion, v1alpha1.GroupVersion.Group+"/"):
			w := &v1alpha1.Worker{}
			if err := yaml.UnmarshalStrict(doc, w); err != nil {
				return fmt.Errorf("%s: document %d (Worker): %w", source, i+1, err)
			}
			into.Workers = append(into.Workers, w)
		case meta.Kind == "ConfigMap" && meta.APIVersion == "v1":
			cm := &corev1.ConfigMap{}
			if err := yaml.UnmarshalStrict(doc, cm); err != nil {
				return fmt.Errorf("%s: document %d (ConfigMap): %w", source, i+1, err)
			}
			into.ConfigMaps = append(into.ConfigMaps, cm)
		case meta.Kind == "Secret" && meta.APIVersion == "v1":
			s := &corev1.Secret{}
			if err := yaml.UnmarshalStrict(doc, s); err != nil {
				return fmt.Errorf("%s: document %d (Secret): %w", source, i+1, err)
			}
			into.Secrets = append(into.Secrets, s)
		case meta.Kind == "" || meta.APIVersion == "":
			return fmt.Errorf("%s: document %d: apiVersion and kind are required", source, i+1)
		default:
			into.Others = append(into.Others, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

func namespaceOf(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// Rendered is one Worker's rendering by RenderManifests.
type Rendered struct {
	Worker *v1alpha1.Worker
	Output *render.Output
}

// RenderManifests renders every Worker of m, as the controller would: a
// source.configMap Worker gets the ConfigMap of that name in its namespace from m,
// and service bindings to Workers of m resolve to their in-cluster addresses
// (render.RPCAddress). A binding to a Worker not in m is an error naming the field.
// Results are sorted by namespace and name.
func RenderManifests(m *Manifests, opts render.Options) ([]Rendered, error) {
	return RenderManifestsWith(m, opts, nil)
}

// RenderManifestsWith is RenderManifests with service binding addresses from address
// (given the target Worker) instead of render.RPCAddress; nil means render.RPCAddress.
func RenderManifestsWith(m *Manifests, opts render.Options, address func(target *v1alpha1.Worker) string) ([]Rendered, error) {
	if address == nil {
		address = func(w *v1alpha1.Worker) string { return render.RPCAddress(w, opts) }
	}
	workers := append([]*v1alpha1.Worker(nil), m.Workers...)
	sort.SliceStable(workers, func(i, j int) bool {
		a, b := workers[i], workers[j]
		if namespaceOf(a.Namespace) != namespaceOf(b.Namespace) {
			return namespaceOf(a.Namespace) < namespaceOf(b.Namespace)
		}
		return a.Name < b.Name
	})
	var out []Rendered
	for _, w := range workers {
		in := render.Input{Worker: w, Options: opts, Services: map[string]render.ServiceTarget{}}
		for _, o := range workers {
			if namespaceOf(o.Namespace) == namespaceOf(w.Namespace) {
				in.Services[o.Name] = render.ServiceTarget{Address: address(o)}
			}
		}
		if cs := w.Spec.Source.ConfigMap; cs != nil {
			for _, cm := range m.ConfigMaps {
				if cm.Name == cs.Name && namespaceOf(cm.Namespace) == namespaceOf(w.Namespace) {
					in.ConfigMap = cm
				}
			}
		}
		o, err := render.Render(in)
		if err != nil {
			return nil, fmt.Errorf("Worker %s/%s: %w", namespaceOf(w.Namespace), w.Name, err)
		}
		out = append(out, Rendered{Worker: w, Output: o})
	}
	return out, nil
}

// SecretEnv returns "WORKERD_SECRET_<NAME>=<value>" for every secretKeyRef env var of
// out whose Secret and key are in secrets (same namespace as w), for running the
// rendering locally; missing ones are listed in missing ("<secret>/<key>").
func SecretEnv(w *v1alpha1.Worker, out *render.Output, secrets []*corev1.Secret) (env []string, missing []string) {
	for _, e := range out.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		found := false
		for _, s := range secrets {
			if s.Name != ref.Name || namespaceOf(s.Namespace) != namespaceOf(w.Namespace) {
				continue
			}
			if v, ok := s.StringData[ref.Key]; ok {
				env, found = append(env, e.Name+"="+v), true
			} else if v, ok := s.Data[ref.Key]; ok {
				env, found = append(env, e.Name+"="+string(v)), true
			}
		}
		if !found {
			missing = append(missing, ref.Name+"/"+ref.Key)
		}
	}
	return env, missing
}

// Format writes out as text: a header naming the Worker and version, the secret
// references, then every file ("--- <path>" and its content; binary files as base64).
// With shims false the shim worker files are listed by path only.
func Format(wr io.Writer, w *v1alpha1.Worker, out *render.Output, shims bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Worker %s/%s version %s\n", namespaceOf(w.Namespace), w.Name, out.Version)
	fmt.Fprintf(&b, "# args: %s\n", strings.Join(render.Args(w), " "))
	for _, e := range out.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fmt.Fprintf(&b, "# env %s from Secret %s key %s\n", e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
		}
	}
	files := append(append([]render.File(nil), out.Files...), out.External...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		origin := "key " + f.Key
		for _, x := range out.External {
			if x.Path == f.Path {
				origin = "from ConfigMap " + w.Spec.Source.ConfigMap.Name + " key " + f.Key
			}
		}
		if strings.HasPrefix(f.Path, podcontract.ShimSubdir+"/") && !shims {
			fmt.Fprintf(&b, "--- %s (%s, %d bytes, shim)\n", f.Path, origin, len(f.Data))
			continue
		}
		if f.Binary {
			fmt.Fprintf(&b, "--- %s (%s, binary, base64)\n%s\n", f.Path, origin, base64.StdEncoding.EncodeToString(f.Data))
			continue
		}
		fmt.Fprintf(&b, "--- %s (%s)\n%s", f.Path, origin, f.Data)
		if len(f.Data) > 0 && f.Data[len(f.Data)-1] != '\n' {
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(wr, b.String())
	return err
}
