package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/loopback"
)

// Pinned versions; hack/ scripts and the Makefile use the same defaults.
const (
	WorkerdVersion    = "1.20261117.1"
	KubernetesVersion = "1.37.2"
)

// RepoRoot returns the directory holding the project's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/workerd-operator/workerd-operator\n")) {
			if _, err := os.Stat(filepath.Join(dir, "hack", "install-workerd.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no workerd-operator go.mod above the working directory")
		}
		dir = parent
	}
}

// CacheDir is the per-machine cache (WORKERD_OPERATOR_CACHE, else ~/.cache/workerd-operator).
func CacheDir() string {
	if d := os.Getenv("WORKERD_OPERATOR_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "workerd-operator")
}

// SharedDir returns the shared sources of truth: WORKERD_OPERATOR_SHARED, else
// ../shared next to the repository (where CI has it too).
func SharedDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("WORKERD_OPERATOR_SHARED"); d != "" {
		return d
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(filepath.Dir(root), "shared")
	if _, err := os.Stat(filepath.Join(d, "DESIGN.md")); err != nil {
		t.Fatalf("testenv: shared sources of truth not found at %s (set WORKERD_OPERATOR_SHARED): %v", d, err)
	}
	return d
}

// SharedFile returns the path of a file under the shared directory, e.g.
// SharedFile(t, "testdata", "cron-cloudflare-dialect.json").
func SharedFile(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{SharedDir(t)}, elem...)...)
}

var (
	workerdOnce sync.Once
	workerdPath string
	workerdErr  error
)

// WorkerdBinary returns the pinned workerd binary (WORKERD_BIN, else installed into the
// cache by hack/install-workerd.sh on first use).
func WorkerdBinary(t testing.TB) string {
	t.Helper()
	p, err := Workerd()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Workerd is WorkerdBinary for callers without a testing.TB (benchmarks' main, tools).
func Workerd() (string, error) {
	workerdOnce.Do(func() {
		if p := os.Getenv("WORKERD_BIN"); p != "" {
			workerdPath = p
			return
		}
		root, err := RepoRoot()
		if err != nil {
			// Outside the repository (the binary run from elsewhere): use the one
			// workerd the install script put in the per-machine cache.
			workerdPath, workerdErr = cachedWorkerd(err)
			return
		}
		out, err := runScript(filepath.Join(root, "hack", "install-workerd.sh"))
		if err != nil {
			workerdErr = err
			return
		}
		workerdPath = out
	})
	return workerdPath, workerdErr
}

// ControlPlaneDir returns the directory holding etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kubectl, building the named binaries
// first if they are missing (hack/build-control-plane.sh).
func ControlPlaneDir(binaries ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if _, err := runScript(filepath.Join(root, "hack", "build-control-plane.sh"), binaries...); err != nil {
		return "", err
	}
	return filepath.Join(CacheDir(), "k8s", "v"+KubernetesVersion), nil
}

func runScript(path string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{path}, args...)...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testenv: %s: %w", filepath.Base(path), err)
	}
	return strings.TrimSpace(stdout.String()), nil
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

// cachedWorkerd finds the workerd that hack/install-workerd.sh installed under
// $WORKERD_OPERATOR_CACHE (default ~/.cache/workerd-operator)/workerd/<version>. It
// fails when there is none or more than one (then WORKERD_BIN must choose), wrapping
// why the repository could not be used.
func cachedWorkerd(why error) (string, error) {
	cache := CacheDir()
	found, _ := filepath.Glob(filepath.Join(cache, "workerd", "*", "node_modules", "@cloudflare", "workerd-linux-64", "bin", "workerd"))
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%w; and no workerd in %s (run make tools in the repository, or set WORKERD_BIN)", why, filepath.Join(cache, "workerd"))
	}
	return "", fmt.Errorf("%w; and several workerd builds in %s: set WORKERD_BIN to one of %v", why, filepath.Join(cache, "workerd"), found)
}
