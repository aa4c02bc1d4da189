package common

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The references cache keeps what the watches and the inputs hash use and drops the
// annotations, where kubectl apply keeps a copy of a Secret's data
// (kubectl.kubernetes.io/last-applied-configuration,
// https://kubernetes.io/docs/reference/labels-annotations-taints/#kubectl-kubernetes-io-last-applied-configuration).
func TestReferenceMetadataStripped(t *testing.T) {
	m := ReferenceMeta("Secret")
	m.Namespace, m.Name, m.ResourceVersion = "ns", "api", "42"
	m.Labels = map[string]string{"team": "a"}
	m.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"token":"czNjcjN0"}}`}
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	out, err := stripMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	if got.Annotations != nil || got.ManagedFields != nil {
		t.Errorf("annotations %v, managed fields %v kept", got.Annotations, got.ManagedFields)
	}
	if got.Name != "api" || got.ResourceVersion != "42" || got.Labels["team"] != "a" {
		t.Errorf("identity lost: %+v", got.ObjectMeta)
	}
}
