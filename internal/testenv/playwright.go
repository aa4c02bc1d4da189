package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// ErrNoChromium is returned by BrowserReady and RunSpec when Debian's chromium is
// missing and this is not root to install it: the caller skips, saying so.
var ErrNoChromium = errors.New("Debian's chromium is not installed and this is not root to install it " +
	"(run `make tools` as root, or `sudo apt-get install chromium`)")

// specTimeout bounds one spec run: Playwright's own timeouts (30s a test, 5s an
// assertion) end a stuck test long before.
const specTimeout = 5 * time.Minute

// browser is what a spec runs with: the pinned Node and @playwright/test, Debian's
// chromium and our Playwright config (test/browser).
type browser struct{ nodeBin, playwright, chromium, config string }

var (
	browserOnce sync.Once
	browserTool browser
	browserErr  error
)

// BrowserReady installs what RunSpec needs (cached after the first call): Node 22,
// @playwright/test (hack/install-playwright.sh) and, as root, Debian's chromium
// (hack/install-chromium.sh). It returns ErrNoChromium when chromium cannot be had.
// Call it before deploying what a spec tests, so a skip costs nothing.
func BrowserReady() error {
	_, err := browserTools()
	return err
}

func browserTools() (browser, error) {
	browserOnce.Do(func() {
		var b browser
		root, err := toolchain.RepoRoot()
		if err == nil {
			b.config = filepath.Join(root, "test", "browser", "playwright.config.ts")
			b.nodeBin, err = toolchain.NodeBin()
		}
		if err == nil {
			b.playwright, err = toolchain.Playwright()
		}
		if err == nil {
			b.chromium, err = toolchain.Chromium()
		}
		if err == nil && b.chromium == "" {
			err = ErrNoChromium
		}
		browserTool, browserErr = b, err
	})
	return browserTool, browserErr
}

var (
	// passed is the list reporter's summary line of the tests that passed.
	passed = regexp.MustCompile(`(?m)^\s*\d+ passed\b`)
	// ansi are the terminal colour codes Playwright puts in its error messages.
	ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")
	// pageSnapshot is the accessibility tree of the page at the failure, which
	// Playwright writes into error-context.md: what we served, as the locators see it.
	pageSnapshot = regexp.MustCompile("(?s)```yaml\n(.*?)```")
)

// RunSpec runs the Playwright spec file spec (read in place; it imports "./fixtures",
// which test/browser/fixtures.ts provides) in headless Chromium against templateURL.
// It fails, with Playwright's output, unless every test in the spec passed.
func RunSpec(spec, templateURL string) error {
	b, err := browserTools()
	if err != nil {
		return err
	}
	// Node resolves the spec's imports from its real path: the config's "./fixtures"
	// mapping compares directories, so it gets the real one (the shared data directory
	// may be a symbolic link).
	real, err := filepath.EvalSymlinks(spec)
	if err != nil {
		return fmt.Errorf("playwright: spec: %w", err)
	}
	spec = real
	out, err := os.MkdirTemp("", "workerd-operator-playwright-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	ctx, cancel := context.WithTimeout(context.Background(), specTimeout)
	defer cancel()
	cli := filepath.Join(b.playwright, "node_modules", "@playwright", "test", "cli.js")
	cmd := exec.CommandContext(ctx, filepath.Join(b.nodeBin, "node"), cli, "test", "--config", b.config)
	cmd.Env = append(os.Environ(),
		"PATH="+b.nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		// The fixture and config import @playwright/test from the cache.
		"NODE_PATH="+filepath.Join(b.playwright, "node_modules"),
		"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1",
		"CHROMIUM="+b.chromium, "PLAYWRIGHT_SPEC="+spec, "PLAYWRIGHT_OUTPUT_DIR="+out,
		"TEMPLATE_URL="+templateURL)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Playwright's workers and Chromium die with the run.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err = cmd.Run()
	if err == nil && !passed.Match(log.Bytes()) {
		err = errors.New("no test passed")
	}
	if err != nil {
		return fmt.Errorf("playwright: %s against %s: %w\n%s%s", filepath.Base(spec), templateURL, err,
			ansi.ReplaceAll(log.Bytes(), nil), pageSnapshots(out))
	}
	return nil
}

// pageSnapshots returns the page snapshots of the failed tests whose results are in
// dir, each under a heading naming the test.
func pageSnapshots(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "error-context.md"))
	var b strings.Builder
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, m := range pageSnapshot.FindAllSubmatch(md, -1) {
			fmt.Fprintf(&b, "\npage at the failure (%s):\n%s", filepath.Base(filepath.Dir(f)), m[1])
		}
	}
	return b.String()
}
