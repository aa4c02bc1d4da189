package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/workerd-operator/workerd-operator/internal/devcluster"
)

// TestDrift applies every sample server-side (field manager of `make dev`), waits until
// the controllers have reconciled each to Ready at its current generation, then applies
// the same files again: the second apply must change nothing — same resourceVersion and
// same managedFields — so a GitOps tool sees no diff from the operator's defaults,
// webhook mutations or status writes.
func TestDrift(t *testing.T) {
	ctx := context.Background()
	samples, err := devcluster.ReadManifests(filepath.Join(repoRoot, "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if s.GetNamespace() == "" {
			s.SetNamespace(sampleNS)
		}
	}
	if err := cluster.Apply(ctx, samples, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitReady(ctx, samples, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	dyn, mapper := dynamicClient(t)
	for _, s := range samples {
		ri := resourceFor(t, dyn, mapper, s)
		eventually(t, 2*time.Minute, fmt.Sprintf("%s %s reconciled", s.GetKind(), s.GetName()), func() error {
			cur, err := ri.Get(ctx, s.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			observed, _, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
			if observed != cur.GetGeneration() {
				return fmt.Errorf("generation %d, observed %d", cur.GetGeneration(), observed)
			}
			return nil
		})
	}
	for _, s := range samples {
		t.Run(s.GetKind()+"/"+s.GetName(), func(t *testing.T) {
			ri := resourceFor(t, dyn, mapper, s)
			data, err := s.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			// A status write of the controllers between the read and the apply also moves
			// resourceVersion; that is not drift, so such a round is repeated (3 at most).
			var why string
			for range 3 {
				before, err := ri.Get(ctx, s.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				force := true
				after, err := ri.Patch(ctx, s.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: devcluster.FieldManager, Force: &force})
				if err != nil {
					t.Fatalf("second apply: %v", err)
				}
				if after.GetResourceVersion() == before.GetResourceVersion() && reflect.DeepEqual(after.GetManagedFields(), before.GetManagedFields()) {
					return
				}
				why = diffApplied(before, after)
				if why != "" {
					t.Fatalf("the second apply changed the object: %s", why)
				}
			}
			t.Fatalf("resourceVersion kept moving by status writes over 3 rounds")
		})
	}
}

// diffApplied says what differs between before and after outside of status and of the
// status writers' managedFields entries: "" when only a status write came between.
func diffApplied(before, after *unstructured.Unstructured) string {
	if before.GetGeneration() != after.GetGeneration() {
		return fmt.Sprintf("generation %d -> %d", before.GetGeneration(), after.GetGeneration())
	}
	for _, f := range []string{"spec", "metadata.labels", "metadata.annotations", "metadata.finalizers"} {
		path := []string{f}
		if f != "spec" {
			path = []string{"metadata", f[len("metadata."):]}
		}
		a, _, _ := unstructured.NestedFieldNoCopy(before.Object, path...)
		b, _, _ := unstructured.NestedFieldNoCopy(after.Object, path...)
		if !reflect.DeepEqual(a, b) {
			return fmt.Sprintf("%s: %v -> %v", f, a, b)
		}
	}
	nonStatus := func(u *unstructured.Unstructured) []metav1.ManagedFieldsEntry {
		var out []metav1.ManagedFieldsEntry
		for _, m := range u.GetManagedFields() {
			if m.Subresource != "status" {
				out = append(out, m)
			}
		}
		return out
	}
	if a, b := nonStatus(before), nonStatus(after); !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("managedFields (outside status): %s -> %s", managers(a), managers(b))
	}
	return ""
}

func managers(ms []metav1.ManagedFieldsEntry) string {
	s := ""
	for _, m := range ms {
		s += fmt.Sprintf("[%s %s %s %v %d bytes] ", m.Manager, m.Operation, m.Subresource, m.Time, len(m.FieldsV1.String()))
	}
	return s
}

func dynamicClient(t *testing.T) (dynamic.Interface, meta.RESTMapper) {
	t.Helper()
	cfg := cluster.RestConfig()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

func resourceFor(t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(m.Resource).Namespace(o.GetNamespace())
}
