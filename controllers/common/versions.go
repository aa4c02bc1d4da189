package common

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// VersionsKept is how many of a Worker's newest versions are stored; a version still
// deployed is kept besides (docs/versions.md).
const VersionsKept = 10

// annotationCreated on a stored version is when it was stored, to the nanosecond
// (creationTimestamp has seconds: versions stored within a second would not sort).
const annotationCreated = "fleet.workerd-operator.io/version-created"

// versionSpecKey is the key of a stored version's spec (gzipped JSON: a Worker's code
// may take most of a ConfigMap's 1 MiB) in its ConfigMap's binaryData.
const versionSpecKey = "spec.json.gz"

// VersionRecordName is the name of the ConfigMap storing version id of Worker worker.
func VersionRecordName(worker, id string) string { return worker + "-version-" + id }

func versionSelector(worker string) client.MatchingLabels {
	return client.MatchingLabels{podcontract.LabelWorker: worker, podcontract.LabelComponent: podcontract.ComponentWorkerVersion}
}

// RecordVersion stores the version of w's spec, once: an immutable ConfigMap owned by
// w holding the versioned spec and the message of w's version-message annotation.
func RecordVersion(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker) error {
	id := w.Spec.VersionID()
	if recorded(ctx, c, w.Namespace, VersionRecordName(w.Name, id)) {
		return nil
	}
	spec, err := gzipJSON(w.Spec.VersionedSpec())
	if err != nil {
		return err
	}
	labels := map[string]string{
		podcontract.LabelName: podcontract.AppName, podcontract.LabelManagedBy: podcontract.ManagedBy,
		podcontract.LabelInstance: w.Name, podcontract.LabelWorker: w.Name,
		podcontract.LabelComponent: podcontract.ComponentWorkerVersion, podcontract.LabelWorkerVersion: id,
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: VersionRecordName(w.Name, id), Namespace: w.Namespace, Labels: labels,
			Annotations: map[string]string{
				podcontract.AnnotationVersionMessage: w.Annotations[podcontract.AnnotationVersionMessage],
				annotationCreated:                    time.Now().UTC().Format(time.RFC3339Nano),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(w, fleetv1alpha1.GroupVersion.WithKind("Worker"))},
		},
		Immutable:  ptr.To(true),
		BinaryData: map[string][]byte{versionSpecKey: spec},
	}
	err = c.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// recorded tells whether the cache holds the version record name (its metadata): every
// pass of every Worker stores its version, and all but the first would otherwise gzip
// the spec and send a create the API server refuses. A miss falls through to the
// create, which tells for sure.
func recorded(ctx context.Context, c client.Client, ns, name string) bool {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m) == nil
}

// ListVersions are w's stored versions, newest first (ties by id). It reads metadata
// only, from the cache; versions not controlled by w are not w's.
func ListVersions(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker) ([]fleetv1alpha1.WorkerVersion, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, list, client.InNamespace(w.Namespace), versionSelector(w.Name)); err != nil {
		return nil, err
	}
	var out []fleetv1alpha1.WorkerVersion
	for _, cm := range list.Items {
		id := cm.Labels[podcontract.LabelWorkerVersion]
		if !metav1.IsControlledBy(&cm, w) || cm.Name != VersionRecordName(w.Name, id) {
			continue
		}
		created := cm.CreationTimestamp
		if t, err := time.Parse(time.RFC3339Nano, cm.Annotations[annotationCreated]); err == nil {
			created = metav1.NewTime(t)
		}
		out = append(out, fleetv1alpha1.WorkerVersion{ID: id, Created: created, Message: cm.Annotations[podcontract.AnnotationVersionMessage]})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(&out[j].Created) {
			return out[j].Created.Before(&out[i].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// PruneVersions deletes w's stored versions beyond the newest VersionsKept, except
// those keep names (the deployed ones), and returns the versions left.
func PruneVersions(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, versions []fleetv1alpha1.WorkerVersion, keep map[string]bool) ([]fleetv1alpha1.WorkerVersion, error) {
	var left []fleetv1alpha1.WorkerVersion
	for i, v := range versions {
		if i < VersionsKept || keep[v.ID] {
			left = append(left, v)
			continue
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: VersionRecordName(w.Name, v.ID), Namespace: w.Namespace}}
		if err := c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return versions, err
		}
	}
	return left, nil
}

// VersionSpec is the spec of w's version id: w's own when id is its spec's version,
// else the stored one, read from the API server (the cache holds no ConfigMap data).
// A version that is not stored is a Blocked InvalidSpec error naming the field.
func VersionSpec(ctx context.Context, live client.Reader, w *fleetv1alpha1.Worker, id string) (*fleetv1alpha1.WorkerSpec, error) {
	if id == w.Spec.VersionID() {
		s := w.Spec.VersionedSpec()
		return &s, nil
	}
	cm := &corev1.ConfigMap{}
	err := live.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: VersionRecordName(w.Name, id)}, cm)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(cm, w)) {
		return nil, Blocked(fleetv1alpha1.ReasonInvalidSpec, fmt.Sprintf(
			"spec.deployment.versions: Worker %q has no stored version %q: status.versions lists the %d kept (docs/versions.md)", w.Name, id, VersionsKept))
	}
	if err != nil {
		return nil, err
	}
	s := &fleetv1alpha1.WorkerSpec{}
	if err := gunzipJSON(cm.BinaryData[versionSpecKey], s); err != nil {
		return nil, fmt.Errorf("version %q of Worker %q: ConfigMap %s: %w", id, w.Name, cm.Name, err)
	}
	if got := s.VersionID(); got != id {
		// Not what the operator stored: someone else wrote or replaced the ConfigMap.
		return nil, Blocked(fleetv1alpha1.ReasonInvalidSpec, fmt.Sprintf(
			"spec.deployment.versions: ConfigMap %s holds version %q, not %q: it was not stored by the operator (docs/versions.md)", cm.Name, got, id))
	}
	return s, nil
}

func gzipJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func gunzipJSON(data []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer zr.Close()
	return json.NewDecoder(io.LimitReader(zr, 16<<20)).Decode(v)
}

// WithVersion is w running version spec: spec's code, bindings and settings with w's
// replicas, pod, service and deployment.
func WithVersion(w *fleetv1alpha1.Worker, spec *fleetv1alpha1.WorkerSpec) *fleetv1alpha1.Worker {
	out := w.DeepCopy()
	s := *spec.DeepCopy()
	s.Replicas, s.Pod, s.Service, s.Deployment = out.Spec.Replicas, out.Spec.Pod, out.Spec.Service, out.Spec.Deployment
	out.Spec = s
	return out
}

// ServingWorker is w running its primary deployed version (PrimaryVersion), the one
// its Durable Objects and Workflows run.
func ServingWorker(ctx context.Context, live client.Reader, w *fleetv1alpha1.Worker) (*fleetv1alpha1.Worker, error) {
	id := fleetv1alpha1.PrimaryVersion(w.Spec.DeployedVersions()).VersionID
	if id == w.Spec.VersionID() {
		return w, nil
	}
	s, err := VersionSpec(ctx, live, w, id)
	if err != nil {
		return nil, err
	}
	return WithVersion(w, s), nil
}
