package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/deploy"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// runDir is the run directory (inside the namespaces as outside); runCgroupRoot the
// run's cgroup root, under which joining nodes get theirs.
var runDir, runCgroupRoot string

// templateNames are the projects of the cloudflare/templates snapshot
// (../shared/testdata/cloudflare-templates, never edited) that TestTemplatesServe
// deploys, each with Cloudflare's own Playwright spec for it.
var templateNames = []string{"hello-world-do-template", "vite-react-template", "astro-blog-starter-template",
	"to-do-list-kv-template", "d1-template", "r2-explorer-template"}

// ownTemplateNames are the projects of test/testdata/cloudflare-templates (the same
// snapshot) the suite deploys.
var ownTemplateNames = []string{"containers-template"}

// Markers in the templates directory: why the templates or the browser are missing.
const (
	templatesSkipped = "SKIPPED"
	browserMissing   = "NO-BROWSER"
)

// prepareTemplates copies each template into dir and installs its dependencies as its
// lockfile pins them, and installs what the specs run with (testenv.BrowserReady),
// before the namespaces are entered: npm and apt need the network, the namespaces have
// none. `deploy` then finds node_modules and installs nothing.
func prepareTemplates(dir string) error {
	shared, err := testenv.SharedPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range templateNames {
		p, err := testenv.CopyProject(filepath.Join(shared, "testdata", "cloudflare-templates", name), dir)
		if err != nil {
			return err
		}
		var opts []testenv.BuildOption
		if name == "r2-explorer-template" {
			opts = append(opts, testenv.R2ExplorerBuild)
		}
		err = testenv.Install(p, opts...)
		if errors.Is(err, testenv.ErrNoNode) {
			return os.WriteFile(filepath.Join(dir, templatesSkipped), []byte(err.Error()), 0o644)
		}
		if err != nil {
			return err
		}
	}
	// The repository's own copies (test/testdata/cloudflare-templates): what ../shared lacks.
	root, err := toolchain.RepoRoot()
	if err != nil {
		return err
	}
	for _, name := range ownTemplateNames {
		p, err := testenv.CopyProject(filepath.Join(root, "test", "testdata", "cloudflare-templates", name), dir)
		if err != nil {
			return err
		}
		if err := testenv.Install(p); err != nil {
			return err
		}
	}
	if err := testenv.BrowserReady(); errors.Is(err, testenv.ErrNoChromium) {
		return os.WriteFile(filepath.Join(dir, browserMissing), []byte(err.Error()), 0o644)
	} else if err != nil {
		return err
	}
	return nil
}

// deployTemplate is `workerd-operator deploy` (its own code path, deploy.Run) of the
// prepared copy of template name, pushing to the node's registry; it returns the
// Worker's URL once every object is Ready, and removes the objects when t ends.
func deployTemplate(t *testing.T, name string, opts ...func(*deploy.Options)) string {
	t.Helper()
	dir := filepath.Join(runDir, "templates")
	if why, err := os.ReadFile(filepath.Join(dir, templatesSkipped)); err == nil {
		t.Skipf("templates not installed: %s", why)
	}
	o := deploy.Options{Dir: filepath.Join(dir, name), Namespace: sampleNS, Rest: cluster.rest, Scratch: t.TempDir(),
		Image: registryHost + "/realnode/" + name, Timeout: 5 * time.Minute, Log: deployLog{t}}
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	res, err := deploy.Run(context.Background(), o)
	if res != nil {
		removeAtEnd(t, res.Objects)
	}
	if err != nil {
		logPods(t, sampleNS, name)
		t.Fatal(err)
	}
	t.Logf("deployed %s in %s", name, time.Since(start).Round(time.Second))
	return siteURL(t, res.Import.Worker.Name)
}

// deployLog passes deploy's own progress lines to the test log, not the build's output
// (a failing command's error carries its tail).
type deployLog struct{ t *testing.T }

func (l deployLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if strings.HasPrefix(line, "deploy:") {
			l.t.Log(line)
		}
	}
	return len(p), nil
}

// runTemplateSpec runs Cloudflare's Playwright spec for template name
// (playwright-tests/<name>.spec.ts, unmodified) against url in headless Chromium
// (testenv.RunSpec), inside the node's namespaces.
func runTemplateSpec(t *testing.T, name, url string) {
	t.Helper()
	if why, err := os.ReadFile(filepath.Join(runDir, "templates", browserMissing)); err == nil {
		t.Logf("Cloudflare's Playwright spec for %s NOT run: %s", name, why)
		return
	}
	start := time.Now()
	spec := filepath.Join(repoRoot, "test", "testdata", "cloudflare-templates", "playwright-tests", name+".spec.ts")
	if !slices.Contains(ownTemplateNames, name) {
		spec = testenv.SharedFile(t, "testdata", "cloudflare-templates", "playwright-tests", name+".spec.ts")
	}
	if err := testenv.RunSpec(spec, url); err != nil {
		logPods(t, sampleNS, name)
		t.Fatal(err)
	}
	t.Logf("Cloudflare's Playwright spec for %s passed in %s", name, time.Since(start).Round(time.Second))
}

// importApply imports o with --image to the node's registry (testenv.ImportImage),
// applies the objects until the test ends and returns the Worker's http address.
func importApply(t *testing.T, o wrangler.Options) string {
	t.Helper()
	res, _, objs, err := testenv.ImportImage(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	removeAtEnd(t, objs)
	if err := cluster.apply(ctx, objs, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.waitReady(ctx, objs, 4*time.Minute); err != nil {
		logPods(t, sampleNS, res.Worker.Name)
		t.Fatal(err)
	}
	return siteURL(t, res.Worker.Name)
}

type answer struct {
	status int
	header http.Header
	body   string
}

// request polls GET url (with header) until it answers at all, and returns the answer.
func request(t *testing.T, url string, header map[string]string) answer {
	t.Helper()
	var a answer
	eventually(t, 2*time.Minute, "GET "+url, func() error {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		a = answer{resp.StatusCode, resp.Header, string(b)}
		if err == nil && resp.StatusCode >= 500 {
			err = fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		}
		return err
	})
	return a
}

// TestTemplatesServe: the six templates, each deployed from a clean copy by
// `workerd-operator deploy` (its own build, wrangler's dry run, the image pushed to the
// node's registry and pulled by containerd), answer as on the local cluster
// (test/e2e's template tests have the reasons of each expected value) and pass
// Cloudflare's own Playwright spec in Chromium.
func TestTemplatesServe(t *testing.T) {
	requireNode(t)
	t.Run("hello-world-do", func(t *testing.T) {
		url := deployTemplate(t, "hello-world-do-template")
		// src/index.ts: the Durable Object answers SELECT 'Hello, World!' from its SQLite storage.
		if a := request(t, url+"/greet", nil); a.status != 200 || a.body != "Hello, World!" {
			t.Errorf("GET /greet: %d %q", a.status, a.body)
		}
		runTemplateSpec(t, "hello-world-do-template", url)
	})
	t.Run("vite-react", func(t *testing.T) {
		url := deployTemplate(t, "vite-react-template")
		index, err := os.ReadFile(filepath.Join(runDir, "templates", "vite-react-template", "dist", "client", "index.html"))
		if err != nil {
			t.Fatal(err)
		}
		// https://developers.cloudflare.com/workers/static-assets/routing/single-page-application/
		for _, p := range []string{"/", "/some/client/route"} {
			if a := request(t, url+p, map[string]string{"Sec-Fetch-Mode": "navigate"}); a.status != 200 || a.body != string(index) {
				t.Errorf("GET %s: %d %.100q, want index.html", p, a.status, a.body)
			}
		}
		if a := request(t, url+"/api/", nil); strings.TrimSpace(a.body) != `{"name":"Cloudflare"}` {
			t.Errorf("GET /api/: %d %q", a.status, a.body)
		}
		runTemplateSpec(t, "vite-react-template", url)
	})
	t.Run("astro-blog", func(t *testing.T) {
		url := deployTemplate(t, "astro-blog-starter-template")
		post := request(t, url+"/blog/first-post/", nil)
		if post.status != 200 || !strings.Contains(post.body, "<title>First post") || post.header.Get("ETag") == "" {
			t.Fatalf("GET /blog/first-post/: %d ETag %q %.200q", post.status, post.header.Get("ETag"), post.body)
		}
		// https://developers.cloudflare.com/workers/static-assets/#caching-behavior
		if a := request(t, url+"/blog/first-post/", map[string]string{"If-None-Match": post.header.Get("ETag")}); a.status != 304 {
			t.Errorf("If-None-Match: status %d, want 304", a.status)
		}
		if a := request(t, url+"/no/such/page", nil); a.status != 404 || !strings.Contains(a.body, "404") {
			t.Errorf("GET /no/such/page: %d %.200q, want Astro's 404 page", a.status, a.body)
		}
		runTemplateSpec(t, "astro-blog-starter-template", url)
	})
	t.Run("to-do-list-kv", func(t *testing.T) {
		url := deployTemplate(t, "to-do-list-kv-template")
		runTemplateSpec(t, "to-do-list-kv-template", url)
	})
	t.Run("d1", func(t *testing.T) {
		url := deployTemplate(t, "d1-template")
		// migrations/0001_create_comments_table.sql seeds these comments; the page lists them.
		page := request(t, url+"/", nil)
		for _, want := range []string{"Kristian", "Congrats!", "Serena", "Keep up the good work!"} {
			if !strings.Contains(page.body, want) {
				t.Errorf("GET /: %d lacks %q: %.300q", page.status, want, page.body)
			}
		}
		runTemplateSpec(t, "d1-template", url)
	})
	t.Run("r2-explorer", func(t *testing.T) {
		startS3(t, "r2-explorer-bucket") // wrangler.json's bucket_name
		url := deployTemplate(t, "r2-explorer-template", func(o *deploy.Options) {
			o.R2Endpoint = "http://s3." + sampleNS + ".svc.cluster.local:7070"
		})
		// src/index.ts names the binding "bucket".
		if a := request(t, url+"/api/server/config", nil); !strings.Contains(a.body, `"buckets":[{"name":"bucket"`) {
			t.Errorf("GET /api/server/config: %d %.300q, want the binding \"bucket\"", a.status, a.body)
		}
		runTemplateSpec(t, "r2-explorer-template", url)
	})
}
