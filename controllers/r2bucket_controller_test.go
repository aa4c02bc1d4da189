package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// An R2Bucket is Ready once its credentials Secret exists; a Worker binding it waits
// for it (ReferenceNotFound), then its pods' sidecar gets the bucket in its env and the
// credentials from the Secret (never their values in the pod template), and workerd the
// sidecar alias of the bucket; an endpoint change reaches the pod template.
func TestR2BucketBinding(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := workerFixture(ns, "gallery", func(w *fleetv1alpha1.Worker) {
		w.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "PHOTOS", R2Bucket: &fleetv1alpha1.LocalObjectReference{Name: "photos"}}}
	})
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	eventually(t, "the Worker waits for its R2Bucket", func() error {
		c := meta.FindStatusCondition(getWorker(t, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonReferenceNotFound || !strings.Contains(c.Message, `R2Bucket "photos"`) {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	rb := &fleetv1alpha1.R2Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "photos"}, Spec: fleetv1alpha1.R2BucketSpec{S3: fleetv1alpha1.S3BucketSource{
		Endpoint: "http://versitygw.storage:7070", Bucket: "photos-bucket", CredentialsSecret: fleetv1alpha1.LocalObjectReference{Name: "photos-s3"},
	}}}
	if err := k8sClient.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	r2Ready(t, client.ObjectKeyFromObject(rb), metav1.ConditionFalse, fleetv1alpha1.ReasonSecretNotFound)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "photos-s3"}, StringData: map[string]string{
		fleetv1alpha1.R2AccessKeyIDKey: "id", fleetv1alpha1.R2SecretAccessKeyKey: "s3cret-value",
	}}
	if err := k8sClient.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	r2Ready(t, client.ObjectKeyFromObject(rb), metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled)
	eventually(t, "the sidecar carries the bucket and workerd its alias", func() error {
		return checkR2Pod(key, "http://versitygw.storage:7070")
	})
	patch := client.MergeFrom(rb.DeepCopy())
	rb.Spec.S3.Endpoint = "https://s3.example.com"
	if err := k8sClient.Patch(ctx, rb, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the endpoint change reaches the pod template", func() error {
		return checkR2Pod(key, "https://s3.example.com")
	})
}

func r2Ready(t *testing.T, key client.ObjectKey, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, "R2Bucket Ready "+string(status)+" "+reason, func() error {
		rb := &fleetv1alpha1.R2Bucket{}
		if err := k8sClient.Get(context.Background(), key, rb); err != nil {
			return err
		}
		c := meta.FindStatusCondition(rb.Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Status != status || c.Reason != reason || rb.Status.ObservedGeneration != rb.Generation {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
}

// checkR2Pod checks the Worker's pod template: the sidecar's R2 env with endpoint, the
// credentials by secretKeyRef, and workerd's flag for the alias.
func checkR2Pod(key client.ObjectKey, endpoint string) error {
	dep, err := getDeployment(key)
	if err != nil {
		return err
	}
	spec := dep.Spec.Template.Spec
	var buckets []render.R2Bucket
	refs := map[string]string{}
	for _, e := range spec.InitContainers[0].Env {
		switch {
		case e.Name == podcontract.R2ConfigEnv:
			if err := json.Unmarshal([]byte(e.Value), &buckets); err != nil {
				return err
			}
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case strings.Contains(e.Value, "s3cret-value"):
			return fmt.Errorf("a credential value in the pod template: %s", e.Name)
		}
	}
	if len(buckets) != 1 || buckets[0].Name != "photos" || buckets[0].Bucket != "photos-bucket" || buckets[0].Endpoint != endpoint {
		return fmt.Errorf("sidecar buckets %+v, want photos at %s", buckets, endpoint)
	}
	if refs[buckets[0].AccessKeyIDEnv] != "photos-s3/"+fleetv1alpha1.R2AccessKeyIDKey || refs[buckets[0].SecretAccessKeyEnv] != "photos-s3/"+fleetv1alpha1.R2SecretAccessKeyKey {
		return fmt.Errorf("credential env %v", refs)
	}
	for _, c := range spec.Containers {
		for _, a := range c.Args {
			if a == fmt.Sprintf("--external-addr=%s=%s:%d", render.R2Service("photos"), podcontract.LoopbackHost, podcontract.SidecarPort) {
				return nil
			}
		}
	}
	return fmt.Errorf("workerd has no --external-addr for %s", render.R2Service("photos"))
}

// An R2Bucket is Ready only when its credentials Secret holds both keys the sidecar's
// env names (a missing one keeps the pods' sidecars from starting,
// CreateContainerConfigError); the operator learns the key names from the Secret's
// metadata (its managedFields), never its values.
func TestR2BucketSecretKeys(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	rb := &fleetv1alpha1.R2Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "docs"}, Spec: fleetv1alpha1.R2BucketSpec{S3: fleetv1alpha1.S3BucketSource{
		Endpoint: "http://versitygw.storage:7070", Bucket: "docs", CredentialsSecret: fleetv1alpha1.LocalObjectReference{Name: "docs-s3"},
	}}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "docs-s3"}, StringData: map[string]string{fleetv1alpha1.R2AccessKeyIDKey: "id"}}
	for _, o := range []client.Object{sec, rb} {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	key := client.ObjectKeyFromObject(rb)
	r2Ready(t, key, metav1.ConditionFalse, fleetv1alpha1.ReasonSecretNotFound)
	if c := r2Condition(t, key); !strings.Contains(c.Message, fleetv1alpha1.R2SecretAccessKeyKey) || strings.Contains(c.Message, fleetv1alpha1.R2AccessKeyIDKey+",") {
		t.Errorf("Ready message %q: want it to name the missing key %s only", c.Message, fleetv1alpha1.R2SecretAccessKeyKey)
	}
	patch := client.MergeFrom(sec.DeepCopy())
	sec.StringData = map[string]string{fleetv1alpha1.R2SecretAccessKeyKey: "s3cret"}
	if err := k8sClient.Patch(ctx, sec, patch); err != nil {
		t.Fatal(err)
	}
	r2Ready(t, key, metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled)

	// A server-side apply of stringData (kubectl apply --server-side, GitOps tools) records
	// the keys under stringData, not data.
	applied := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "docs-s3-applied", "namespace": ns},
		"stringData": map[string]any{fleetv1alpha1.R2AccessKeyIDKey: "id", fleetv1alpha1.R2SecretAccessKeyKey: "s3cret"}}}
	if err := k8sClient.Patch(ctx, applied, client.Apply, client.FieldOwner("gitops")); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(rb.DeepCopy())
	rb.Spec.S3.CredentialsSecret.Name = "docs-s3-applied"
	if err := k8sClient.Patch(ctx, rb, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "R2Bucket Ready with the applied Secret", func() error {
		if c := r2Condition(t, key); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "docs-s3-applied") {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
}

func r2Condition(t *testing.T, key client.ObjectKey) *metav1.Condition {
	t.Helper()
	rb := &fleetv1alpha1.R2Bucket{}
	if err := k8sClient.Get(context.Background(), key, rb); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(rb.Status.Conditions, fleetv1alpha1.ConditionReady)
}
