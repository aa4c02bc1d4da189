package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/loopback"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// Pinned versions; hack/ scripts and the Makefile use the same defaults.
const (
	WorkerdVersion    = podcontract.WorkerdVersion
	KubernetesVersion = podcontract.KubernetesVersion
	// OtherWorkerdVersion is a second workerd release from npm, older than the pinned
	// one, that the upgrade tests move Workers to and back (spec.runtime.version).
	OtherWorkerdVersion = "1.20261110.1"
)

// SharedDir returns the directory of reference texts that a few tests compare the
// product against (the texts its limit values, cron dialect cases and channel limits
// were taken from): WORKERD_OPERATOR_SHARED, else ../shared next to the repository
// (where CI has it too). Only tests read it; nothing the product ships refers to it.
func SharedDir(t testing.TB) string {
	t.Helper()
	d, err := SharedPath()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// SharedPath is SharedDir for callers without a testing.TB (a TestMain).
func SharedPath() (string, error) {
	if d := os.Getenv("WORKERD_OPERATOR_SHARED"); d != "" {
		return d, nil
	}
	root, err := toolchain.RepoRoot()
	if err != nil {
		return "", err
	}
	d := filepath.Join(filepath.Dir(root), "shared")
	if _, err := os.Stat(filepath.Join(d, "DESIGN.md")); err != nil {
		return "", fmt.Errorf("testenv: shared sources of truth not found at %s (set WORKERD_OPERATOR_SHARED): %w", d, err)
	}
	return d, nil
}

// SharedFile returns the path of a file under the shared directory, e.g.
// SharedFile(t, "testdata", "cron-cloudflare-dialect.json").
func SharedFile(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{SharedDir(t)}, elem...)...)
}

// WorkerdBinary returns the pinned workerd binary (WORKERD_BIN, else installed into the
// cache by hack/install-workerd.sh on first use).
func WorkerdBinary(t testing.TB) string {
	t.Helper()
	p, err := toolchain.Workerd()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Workerd is toolchain.Workerd.
func Workerd() (string, error) { return toolchain.Workerd() }

// RepoRoot is toolchain.RepoRoot.
func RepoRoot() (string, error) { return toolchain.RepoRoot() }

// CacheDir is toolchain.CacheDir.
func CacheDir() string { return toolchain.CacheDir() }

// ControlPlaneDir is toolchain.ControlPlaneDir.
func ControlPlaneDir(binaries ...string) (string, error) {
	return toolchain.ControlPlaneDir(binaries...)
}

// FreeLoopbackAddr returns a loopback address and port that were free a moment ago:
// loopback.FreeAddr, a random address in 127.128.0.0/9, so that the ports the rest of
// the machine's tests bind or connect from on 127.0.0.1 never take it before the
// process given it binds (a workerd socket failed with "Address already in use" in CI).
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	a, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
