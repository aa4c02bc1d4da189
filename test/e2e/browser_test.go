package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// runTemplateSpec runs the Playwright spec Cloudflare wrote for the template name
// (../shared/testdata/cloudflare-templates/playwright-tests/<name>.spec.ts, unmodified)
// against url, the template as deployed, in headless Debian Chromium (testenv.RunSpec).
// Every template test deploys once and ends with its spec. Without Chromium (not root,
// not installed) it says so and the test's own checks stand alone.
func runTemplateSpec(t *testing.T, name, url string) {
	t.Helper()
	runSpecFile(t, name, testenv.SharedFile(t, "testdata", "cloudflare-templates", "playwright-tests", name+".spec.ts"), url)
}

// runSpecFile is runTemplateSpec with the spec at path spec.
func runSpecFile(t *testing.T, name, spec, url string) {
	t.Helper()
	if err := testenv.BrowserReady(); errors.Is(err, testenv.ErrNoChromium) {
		t.Logf("Cloudflare's Playwright spec for %s NOT run: %v", name, err)
		return
	} else if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := testenv.RunSpec(spec, url); err != nil {
		podLogs(t, name) // the Worker is named after the project (wrangler's name)
		t.Fatal(err)
	}
	t.Logf("Cloudflare's Playwright spec for %s passed in %s", name, time.Since(start).Round(time.Second))
}
