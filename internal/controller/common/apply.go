package common

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Apply server-side applies a typed object with the operator's single field owner.
func Apply(ctx context.Context, c client.Client, obj client.Object) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: raw}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(podcontract.FieldOwner), client.ForceOwnership)
}

// ApplyAll applies objs in order; an error names the object that failed.
func ApplyAll(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, obj := range objs {
		if err := Apply(ctx, c, obj); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	return nil
}

// DeleteOwnedConfigMaps deletes the ConfigMaps matching sel that owner controls and
// keep does not name (config versions no pod runs any more). It reads metadata only.
func DeleteOwnedConfigMaps(ctx context.Context, c client.Client, owner metav1.Object, sel client.MatchingLabels, keep map[string]bool) error {
	cms := &metav1.PartialObjectMetadataList{}
	cms.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, cms, client.InNamespace(owner.GetNamespace()), sel); err != nil {
		return err
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		if keep[cm.Name] || !metav1.IsControlledBy(cm, owner) {
			continue
		}
		if err := c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
