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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// FleetGroup is the API group whose kinds Apply's callers wait on (condition Ready=True).
const FleetGroup = "fleet.workerd-operator.io"

// FieldManager is the server-side apply field manager of `workerd-operator dev`.
const FieldManager = "workerd-operator-dev"

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

// Apply server-side applies objects in order (field manager FieldManager, forced),
// retrying while a kind is not yet served (CRDs applied earlier in the same list) and
// while webhooks are not yet reachable, for up to timeout. Namespaced objects without a
// namespace go to "default".
func (c *Cluster) Apply(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(c.rest)
	if err != nil {
		return err
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	dyn, err := dynamic.NewForConfig(c.rest)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for _, o := range objs {
		for {
			err := c.applyOne(ctx, dyn, mapper, o)
			if err == nil {
				break
			}
			// An invalid object stays invalid: fail now instead of retrying.
			if apierrors.IsInvalid(err) || time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
			mapper.Reset()
			time.Sleep(time.Second)
		}
	}
	return nil
}

func (c *Cluster) applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	data, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := o.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		ri = dyn.Resource(m.Resource).Namespace(ns)
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	return err
}

// WaitReady waits until every object of a fleet.workerd-operator.io kind has condition
// Ready=True and every Deployment/StatefulSet has all replicas ready, or timeout passes;
// the error lists what is not ready and why (the condition's reason and message).
func (c *Cluster) WaitReady(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	dyn, err := dynamic.NewForConfig(c.rest)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.rest)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	deadline := time.Now().Add(timeout)
	for {
		var pending []string
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			if gvk.Group != FleetGroup && !(gvk.Group == "apps" && (gvk.Kind == "Deployment" || gvk.Kind == "StatefulSet")) {
				continue
			}
			if why := c.notReady(ctx, dyn, mapper, o); why != "" {
				pending = append(pending, fmt.Sprintf("%s %s/%s: %s", gvk.Kind, nsOf(o), o.GetName(), why))
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not ready after %s:\n  %s", timeout, strings.Join(pending, "\n  "))
		}
		time.Sleep(time.Second)
	}
}

func nsOf(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return "default"
	}
	return o.GetNamespace()
}

func (c *Cluster) notReady(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err.Error()
	}
	cur, err := dyn.Resource(m.Resource).Namespace(nsOf(o)).Get(ctx, o.GetName(), metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if gvk.Group == "apps" {
		want, _, _ := unstructured.NestedInt64(cur.Object, "spec", "replicas")
		ready, _, _ := unstructured.NestedInt64(cur.Object, "status", "readyReplicas")
		if ready < want {
			return fmt.Sprintf("%d/%d replicas ready", ready, want)
		}
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	for _, ci := range conds {
		cm, _ := ci.(map[string]any)
		if cm["type"] == "Ready" {
			if cm["status"] == "True" {
				return ""
			}
			return fmt.Sprintf("Ready=%v (%v: %v)", cm["status"], cm["reason"], cm["message"])
		}
	}
	return "no Ready condition yet"
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
