// Package scheme builds the runtime scheme of the manager, the CLI and the tests.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// New returns a scheme with the Kubernetes built-in kinds and the kinds of
// fleet.workerd-operator.io/v1alpha1.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := fleetv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
