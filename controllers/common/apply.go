package common

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Apply server-side applies a typed object with the operator's single field owner.
func Apply(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := applyConfiguration(obj)
	if err != nil {
		return err
	}
	return send(ctx, c, u)
}

// applyConfiguration is obj as the operator applies it: no status, no creation stamps.
func applyConfiguration(obj client.Object) (*unstructured.Unstructured, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: raw}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return u, nil
}

// send applies u; u then holds the API server's answer.
func send(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(podcontract.FieldOwner), client.ForceOwnership)
}

// ApplyAll applies objs in order; an error names the object that failed. It first
// checks every object that names a controller (its ownerReference with controller:
// true) against the live one: if one exists and is not controlled by that owner, it
// applies none of them and returns a Blocked ChildConflict error naming it. Server-side
// apply with forced ownership would otherwise take over any object of the same name:
// replace its selector, add the owner reference, and let the garbage collector delete
// it with the owner. An object whose live copy is still the one this process's last
// apply of the same configuration answered with is not sent again (appliedBefore).
func ApplyAll(ctx context.Context, c client.Client, objs ...client.Object) error {
	lives := make([]metav1.Object, len(objs))
	for i, obj := range objs {
		live, err := checkControlled(ctx, c, obj)
		if err != nil {
			return err
		}
		lives[i] = live
	}
	for i, obj := range objs {
		if err := applyChanged(ctx, c, obj, lives[i]); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	return nil
}

// applyChanged applies obj unless live (nil: absent or unread) is unchanged since this
// process applied the same configuration to it.
func applyChanged(ctx context.Context, c client.Client, obj client.Object, live metav1.Object) error {
	u, err := applyConfiguration(obj)
	if err != nil {
		return err
	}
	key, sum, err := appliedKey(u)
	if err != nil {
		return err
	}
	if live != nil && appliedBefore(key, sum, live) {
		return nil
	}
	if err := send(ctx, c, u); err != nil {
		return err
	}
	rememberApplied(key, sum, u)
	return nil
}

// checkControlled returns a Blocked ChildConflict error when obj exists and is not
// controlled by the owner obj's controller reference names (same UID); otherwise the
// live object (nil when absent, or when obj names no controller and nothing is read).
// It reads the cache (the reconcilers own, and so cache, every kind they apply); a miss
// is confirmed with an unstructured read, which the manager's client sends to the API
// server (client.CacheOptions.Unstructured is false), so an object the cache has not
// seen yet is not taken for absent.
func checkControlled(ctx context.Context, c client.Client, obj client.Object) (metav1.Object, error) {
	want := metav1.GetControllerOf(obj)
	if want == nil {
		return nil, nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	key := client.ObjectKeyFromObject(obj)
	live, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, fmt.Errorf("apply %s %s: not a client.Object", gvk.Kind, key.Name)
	}
	err := c.Get(ctx, key, live)
	if apierrors.IsNotFound(err) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		live = u
		err = c.Get(ctx, key, live)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", gvk.Kind, key.Name, err)
	}
	has := metav1.GetControllerOf(live)
	if has != nil && has.UID == want.UID {
		return live, nil
	}
	return nil, Blocked(fleetv1alpha1.ReasonChildConflict, conflictMessage(gvk.Kind, key.Name, want, has))
}

// conflictMessage says which object blocks owner want and who controls it (has; nil
// for no one).
func conflictMessage(kind, name string, want, has *metav1.OwnerReference) string {
	by := "no controller"
	switch {
	case has == nil:
	case has.Kind == want.Kind && has.Name == want.Name:
		by = fmt.Sprintf("a former %s %q (uid %s) that the garbage collector has not removed yet", has.Kind, has.Name, has.UID)
	default:
		by = fmt.Sprintf("%s %q", has.Kind, has.Name)
	}
	return fmt.Sprintf("%s %q already exists and is controlled by %s, not by this %s; the operator does not take over objects it does not control: "+
		"delete or rename that %s, or give the %s another name", kind, name, by, want.Kind, kind, want.Kind)
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
