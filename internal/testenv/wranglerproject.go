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
func BuildProject(src, scratch string) (string, string, error) {
	name := filepath.Base(src)
	nodeBin, err := toolchain.NodeBin()
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", "", fmt.Errorf("%w: npm is not installed", ErrNoNode)
	}
	dir := filepath.Join(scratch, name)
	if err := copyTree(src, dir); err != nil {
		return "", "", err
	}
	bundle := filepath.Join(scratch, name+"-bundle")
	steps := [][]string{{"npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"}}
	if pkg, _ := os.ReadFile(filepath.Join(dir, "package.json")); strings.Contains(string(pkg), `"build":`) {
		steps = append(steps, []string{"npm", "run", "build"})
	}
	steps = append(steps, []string{"npx", "wrangler", "deploy", "--dry-run", "--outdir", bundle})
	for _, s := range steps {
		cmd := exec.Command("nice", s...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"CI=1", "WRANGLER_SEND_METRICS=false", "NO_UPDATE_NOTIFIER=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("%s: %s: %v\n%s", name, strings.Join(s, " "), err, out)
		}
	}
	return dir, bundle, nil
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
