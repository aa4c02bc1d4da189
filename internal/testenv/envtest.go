package testenv

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Scheme returns a scheme with the Kubernetes built-in kinds and the four kinds of
// fleet.workerd-operator.io/v1alpha1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := fleetv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// NewEnvironment returns an envtest environment on a real kube-apiserver and etcd
// (built from Go modules by hack/build-control-plane.sh, first use only) with the
// project's CRDs installed. The caller starts and stops it.
func NewEnvironment() (*envtest.Environment, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := ControlPlaneDir("etcd", "kube-apiserver")
	if err != nil {
		return nil, fmt.Errorf("testenv: control plane: %w", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	// envtest's default /24 of Service IPs runs out before 1,000 Workers' Services.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	return env, nil
}
