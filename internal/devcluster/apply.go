package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/workerd-operator/workerd-operator/internal/kubeapply"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// FleetGroup is the API group whose kinds Apply's callers wait on (condition Ready=True).
const FleetGroup = kubeapply.FleetGroup

// FieldManager is the server-side apply field manager of `workerd-operator dev` (and
// of `deploy`: one owner of the fields, whichever applied them).
const FieldManager = kubeapply.FieldManager

// ReadManifests reads YAML/JSON objects from files and directories (recursively, files
// ending in .yaml, .yml or .json, in name order). Empty documents and kustomization
// files are skipped; `kind: List` is flattened.
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(f string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			ext := filepath.Ext(f)
			if !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") && !strings.HasPrefix(filepath.Base(f), "kustomization") {
				files = append(files, f)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(bytes.NewReader(b)), 4096)
		for i := 0; ; i++ {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("manifests: %s document %d: %w", f, i, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GetKind() == "" || u.GetAPIVersion() == "" {
				return nil, fmt.Errorf("manifests: %s document %d has no apiVersion/kind", f, i)
			}
			if u.IsList() {
				l, err := u.ToList()
				if err != nil {
					return nil, fmt.Errorf("manifests: %s document %d: %w", f, i, err)
				}
				for j := range l.Items {
					out = append(out, &l.Items[j])
				}
				continue
			}
			out = append(out, u)
		}
	}
	return out, nil
}

// Apply server-side applies objects in order (kubeapply.Apply, field manager
// FieldManager).
func (c *Cluster) Apply(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	return kubeapply.Apply(ctx, c.rest, objs, timeout)
}

// WaitReady waits until objs are ready (kubeapply.WaitReady).
func (c *Cluster) WaitReady(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	return kubeapply.WaitReady(ctx, c.rest, objs, timeout, nil)
}

// URL is how to reach a Service from the host.
type URL struct {
	Namespace, Name string
	URL             string
}

// ServiceURLs lists http://<ClusterIP>:<port> of every Service outside kube-system
// and default/kubernetes whose selector matches pods (first port of each).
func (c *Cluster) ServiceURLs(ctx context.Context) ([]URL, error) {
	svcs, err := c.client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []URL
	for _, s := range svcs.Items {
		// A Worker's rpc Service (port "rpc") speaks Cap'n Proto to other Workers, not HTTP to people.
		if s.Namespace == "kube-system" || len(s.Spec.Selector) == 0 || s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 || s.Spec.Ports[0].Name == podcontract.RPCPortName {
			continue
		}
		u, err := c.ServiceURL(ctx, s.Namespace, s.Name, 0)
		if err != nil {
			continue
		}
		out = append(out, URL{Namespace: s.Namespace, Name: s.Name, URL: u})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}

var _ = appsv1.SchemeGroupVersion
var _ = schema.GroupVersionKind{}
