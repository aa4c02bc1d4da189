// Package kubeapply server-side applies objects in order and waits until they are
// ready: what `workerd-operator dev` and `workerd-operator deploy` do to a cluster.
package kubeapply

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FleetGroup is the API group whose kinds WaitReady waits on (condition Ready=True).
const FleetGroup = "fleet.workerd-operator.io"

// FieldManager is the server-side apply field manager of every apply the binary makes
// (`dev --manifests`, `deploy`): one owner, so a later apply replaces what an earlier
// one set instead of conflicting with it.
const FieldManager = "workerd-operator-dev"

func clients(cfg *rest.Config) (dynamic.Interface, *restmapper.DeferredDiscoveryRESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), nil
}

// Apply server-side applies objects in order (field manager FieldManager, forced),
// retrying while a kind is not yet served (CRDs applied earlier in the same list) and
// while webhooks are not yet reachable, for up to timeout. Namespaced objects without a
// namespace go to "default".
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, timeout time.Duration) error {
	dyn, mapper, err := clients(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for _, o := range objs {
		for {
			err := applyOne(ctx, dyn, mapper, o)
			if err == nil {
				break
			}
			// An invalid object stays invalid: fail now instead of retrying.
			if apierrors.IsInvalid(err) || time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), NamespaceOf(o), o.GetName(), err)
			}
			mapper.Reset()
			time.Sleep(time.Second)
		}
	}
	return nil
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) error {
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
		ri = dyn.Resource(m.Resource).Namespace(NamespaceOf(o))
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	return err
}

// WaitReady waits until every object of a fleet.workerd-operator.io kind has condition
// Ready=True and every Deployment/StatefulSet has all replicas ready, or timeout passes;
// the error lists what is not ready and why (the condition's reason and message).
// progress, if set, is called with that list whenever it changes.
func WaitReady(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, timeout time.Duration, progress func(pending []string)) error {
	dyn, mapper, err := clients(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	last := "-"
	for {
		var pending []string
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			if gvk.Group != FleetGroup && !(gvk.Group == "apps" && (gvk.Kind == "Deployment" || gvk.Kind == "StatefulSet")) {
				continue
			}
			if why := notReady(ctx, dyn, mapper, o); why != "" {
				pending = append(pending, fmt.Sprintf("%s %s/%s: %s", gvk.Kind, NamespaceOf(o), o.GetName(), why))
			}
		}
		if now := strings.Join(pending, "\n"); progress != nil && now != last {
			progress(pending)
			last = now
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

// NamespaceOf is the object's namespace, "default" when it names none.
func NamespaceOf(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return "default"
	}
	return o.GetNamespace()
}

func notReady(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err.Error()
	}
	cur, err := dyn.Resource(m.Resource).Namespace(NamespaceOf(o)).Get(ctx, o.GetName(), metav1.GetOptions{})
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
