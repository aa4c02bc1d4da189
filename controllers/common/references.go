package common

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// References reads the objects Workers and D1Databases reference that the operator
// does not label: source and migrations ConfigMaps and the Secrets bindings name. The
// manager's cache holds only the operator's labelled ConfigMaps, Secrets and Pods
// (controller.CacheOptions), so these come from elsewhere: Meta caches their metadata
// only (no data, no annotations, which may hold a copy of the data, e.g. kubectl's
// last-applied-configuration); its events re-render the objects that reference
// them; Live reads a ConfigMap's data from the API server when rendering.
type References struct {
	Meta cache.Cache
	Live client.Reader
}

// NewReferences makes the metadata cache of ConfigMaps and Secrets of namespaces
// (every namespace when empty) and adds it to mgr, which starts it with its own.
func NewReferences(mgr ctrl.Manager, namespaces []string) (*References, error) {
	opts := cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: stripMetadata,
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return &References{Meta: c, Live: mgr.GetAPIReader()}, nil
}

// stripMetadata keeps a cached object's identity, labels, owners and resourceVersion
// (what the watches and the inputs hash use) and drops the rest.
var stripMetadata toolscache.TransformFunc = func(in any) (any, error) {
	if o, err := meta.Accessor(in); err == nil {
		o.SetAnnotations(nil)
		o.SetManagedFields(nil)
	}
	return in, nil
}

// ReferenceMeta is an empty metadata-only object of kind ("ConfigMap", "Secret").
func ReferenceMeta(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return m
}

// Watch is a source of the metadata events of kind ("ConfigMap", "Secret") mapped by
// fn to the objects to reconcile.
func (r *References) Watch(kind string, fn handler.MapFunc) source.Source {
	return source.Kind[client.Object](r.Meta, ReferenceMeta(kind), handler.EnqueueRequestsFromMapFunc(fn))
}
