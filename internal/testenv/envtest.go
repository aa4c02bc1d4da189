package testenv

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/workerd-operator/workerd-operator/internal/scheme"
)

// Scheme returns scheme.New(): the built-in kinds and the project's kinds.
func Scheme() *runtime.Scheme { return scheme.New() }

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

// Start starts a NewEnvironment for test t, stops it when t ends, and returns its config.
func Start(t testing.TB) *rest.Config {
	t.Helper()
	env, err := NewEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := StartEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}

// StartEnv starts env. envtest gives the API server 5 s to create the default namespace
// once it is up; on a loaded 2-core machine that can take longer, so a start that fails
// only for that is stopped and tried again, up to 3 times.
func StartEnv(env *envtest.Environment) (*rest.Config, error) {
	var err error
	for range 3 {
		var cfg *rest.Config
		if cfg, err = env.Start(); err == nil {
			return cfg, nil
		}
		if !strings.Contains(err.Error(), "default namespace didn't register") {
			return nil, err
		}
		_ = env.Stop()
	}
	return nil, err
}
