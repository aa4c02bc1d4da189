// Package toolchain finds the repository, the per-machine cache and the binaries the
// scripts in hack/ install there: the pinned workerd, the control plane, the OCI
// registry, Node.js, for the browser tests Playwright and Chromium, and for the AI
// tests llama.cpp's llama-server. The CLI (render --check) and the tests use it; it
// must not import testing.
package toolchain

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
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
			return "", fmt.Errorf("toolchain: no workerd-operator go.mod above the working directory")
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

var (
	workerdOnce sync.Once
	workerdPath string
	workerdErr  error
)

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

// WorkerdAt returns workerd version from npm (hack/install-workerd.sh), installing it
// into the cache on first use; the pinned version is Workerd (WORKERD_BIN wins).
func WorkerdAt(version string) (string, error) {
	if version == podcontract.WorkerdVersion {
		return Workerd()
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScriptEnv([]string{"WORKERD_VERSION=" + version}, filepath.Join(root, "hack", "install-workerd.sh"))
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
	return filepath.Join(CacheDir(), "k8s", "v"+podcontract.KubernetesVersion), nil
}

// Registry returns the CNCF distribution registry binary, building it on first use
// (hack/build-registry.sh): the local OCI registry of the dev cluster and the tests.
func Registry() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "build-registry.sh"))
}

// NodeBin returns the directory holding the pinned Node.js 22 (hack/install-node.sh),
// installing it on first use: wrangler 4 needs Node >= 22.
func NodeBin() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "install-node.sh"))
}

// S3Server returns the S3-compatible server binary (versitygw) that `make dev` and
// the R2 tests store objects in, building it first if needed (hack/install-s3.sh).
func S3Server() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "install-s3.sh"))
}

// Promtool returns Prometheus' promtool of the version go.mod pins, building it first
// if needed (hack/build-promtool.sh).
func Promtool() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "build-promtool.sh"))
}

func runScript(path string, args ...string) (string, error) {
	return runScriptEnv(nil, path, args...)
}

// runScriptEnv runs the script with env added to this process's environment and
// returns its stdout, trimmed.
func runScriptEnv(env []string, path string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{path}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("toolchain: %s: %w", filepath.Base(path), err)
	}
	return strings.TrimSpace(stdout.String()), nil
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

// NPMTools returns the directory whose node_modules hold esbuild and the PostgreSQL
// driver `postgres` (hack/install-npm-tools.sh installs them into the cache once).
func NPMTools() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "install-npm-tools.sh"))
}

// PostgresBin returns the directory of PostgreSQL's initdb and postgres, installing
// Debian's postgresql package first when root (hack/install-postgres.sh); "" when it is
// not installed and cannot be.
func PostgresBin() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "install-postgres.sh"))
}

// LlamaServerBin returns the path of llama.cpp's llama-server, building it from source
// into the cache first when root or cmake is at hand (hack/install-llama.sh); "" when it
// is not built and cannot be.
func LlamaServerBin() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "install-llama.sh"))
}

// LlamaVocab is the LLaMA tokenizer vocabulary (a GGUF file) hack/install-llama.sh puts
// beside the llama-server binary bin.
func LlamaVocab(bin string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(bin)), "ggml-vocab-llama-spm.gguf")
}

// Playwright returns the directory whose node_modules hold the pinned @playwright/test
// (hack/install-playwright.sh installs it into the cache once, without a browser).
func Playwright() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "install-playwright.sh"))
}

// Chromium returns the path of Debian's chromium, installing the package first when
// root (hack/install-chromium.sh); "" when it is not installed and cannot be.
func Chromium() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return runScript(filepath.Join(root, "hack", "install-chromium.sh"))
}
