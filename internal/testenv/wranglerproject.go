package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// ErrNoNode is returned by BuildProject when Node 22 or npm cannot be had: the caller
// skips, saying so.
var ErrNoNode = errors.New("Node 22 and npm are needed to build a wrangler project")

// BuildProject copies the wrangler project in src (never edited) into scratch/<name> and
// builds it as a user does: `npm ci`, the project's own build (if package.json has
// one), then `wrangler deploy --dry-run --outdir scratch/<name>-bundle`. npm and wrangler
// run on the pinned Node 22 (hack/install-node.sh; wrangler 4 needs Node >= 22). It
// returns the project and bundle directories. It needs the network (npm), so the real
// node suite calls it before entering its namespaces.
func BuildProject(src, scratch string, opts ...BuildOption) (string, string, error) {
	dir, err := CopyProject(src, scratch)
	if err != nil {
		return "", "", err
	}
	run, err := runner(dir)
	if err != nil {
		return "", "", err
	}
	if err := Install(dir, opts...); err != nil {
		return "", "", err
	}
	if pkg, _ := os.ReadFile(filepath.Join(dir, "package.json")); strings.Contains(string(pkg), `"build":`) {
		if err := run("npm", "run", "build"); err != nil {
			return "", "", err
		}
	}
	bundle := filepath.Join(scratch, filepath.Base(src)+"-bundle")
	return dir, bundle, run("npx", "wrangler", "deploy", "--dry-run", "--outdir", bundle)
}

// CopyProject copies the project in src (never edited) into scratch/<name>, writable,
// and returns that directory.
func CopyProject(src, scratch string) (string, error) {
	dir := filepath.Join(scratch, filepath.Base(src))
	return dir, copyTree(src, dir)
}

// Install installs the dependencies of the project in dir as its lockfile pins them
// (`npm ci`, with the opts' replacements) on the pinned Node 22.
func Install(dir string, opts ...BuildOption) error {
	run, err := runner(dir)
	if err != nil {
		return err
	}
	var o buildOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o.install(run)
}

// runner runs commands in dir on the pinned Node 22 (hack/install-node.sh; wrangler 4
// needs Node >= 22), failing with their output.
func runner(dir string) (func(...string) error, error) {
	nodeBin, err := toolchain.NodeBin()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return nil, fmt.Errorf("%w: npm is not installed", ErrNoNode)
	}
	name := filepath.Base(dir)
	return func(step ...string) error {
		cmd := exec.Command("nice", step...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"CI=1", "WRANGLER_SEND_METRICS=false", "NO_UPDATE_NOTIFIER=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %s: %v\n%s", name, strings.Join(step, " "), err, out)
		}
		return nil
	}, nil
}

// BuildOption changes how BuildProject builds.
type BuildOption func(*buildOptions)

type buildOptions struct{ missing, instead string }

// InsteadOfMissing: when `npm ci` fails because the registry does not serve the package
// file missing (a lockfile pin), `npm install instead` (the nearest release it serves)
// replaces it.
func InsteadOfMissing(missing, instead string) BuildOption {
	return func(o *buildOptions) { o.missing, o.instead = missing, instead }
}

// R2ExplorerBuild builds the r2-explorer template: its package-lock pins r2-explorer
// 1.1.10, which the npm registry reachable here does not serve; the nearest patch
// release it serves, 1.1.13, replaces it.
var R2ExplorerBuild = InsteadOfMissing("r2-explorer-1.1.10.tgz", "r2-explorer@1.1.13")

// install runs npm ci, and the replacement install when the option names its failure.
func (o buildOptions) install(run func(...string) error) error {
	npm := []string{"--no-audit", "--no-fund", "--loglevel=error"}
	err := run(append([]string{"npm", "ci"}, npm...)...)
	if err == nil || o.missing == "" || !strings.Contains(err.Error(), o.missing) {
		return err
	}
	return run(append([]string{"npm", "install", o.instead}, npm...)...)
}

// copyTree copies the regular files and directories under src to dst, writable.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
