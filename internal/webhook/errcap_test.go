package webhook

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// TestRefusalListsAtMostMaxErrors: 8,000 refused tolerations (each its own error) give
// a refusal listing MaxErrors of them and the count of the rest, not 8,000 causes.
func TestRefusalListsAtMostMaxErrors(t *testing.T) {
	const n = 8000
	p := &v1alpha1.PodOverrides{}
	for i := range n {
		p.Tolerations = append(p.Tolerations, corev1.Toleration{Key: fmt.Sprintf("k%d", i)})
	}
	c := &check{}
	validatePodPolicy(c, &Policy{}, field.NewPath("spec", "pod"), p, 0)
	_, err := c.result("Worker", "w")
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("result: %v, want an Invalid status", err)
	}
	causes := se.ErrStatus.Details.Causes
	if len(causes) != MaxErrors+1 {
		t.Fatalf("%d causes, want %d and one counting the rest", len(causes), MaxErrors+1)
	}
	if want := fmt.Sprintf("%d more errors not listed", n-MaxErrors); !strings.Contains(causes[MaxErrors].Message, want) {
		t.Errorf("last cause %q, want it to say %q", causes[MaxErrors].Message, want)
	}
}
