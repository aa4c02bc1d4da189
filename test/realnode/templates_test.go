package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// runDir is the run directory (inside the namespaces as outside).
var runDir string

// templateNames are the projects of the cloudflare/templates snapshot
// (../shared/testdata/cloudflare-templates, never edited) that run on the node.
var templateNames = []string{"hello-world-do-template", "vite-react-template", "astro-blog-starter-template"}

// templatesSkipped holds why the templates were not built (no Node 22 or npm).
const templatesSkipped = "SKIPPED"

// buildTemplates builds each template into dir (testenv.BuildProject) before the
// namespaces are entered: npm needs the network, the namespaces have none.
func buildTemplates(dir string) error {
	shared, err := testenv.SharedPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range templateNames {
		_, _, err := testenv.BuildProject(filepath.Join(shared, "testdata", "cloudflare-templates", name), dir)
		if errors.Is(err, testenv.ErrNoNode) {
			return os.WriteFile(filepath.Join(dir, templatesSkipped), []byte(err.Error()), 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// importTemplate imports the built template with --image to the node's registry and
// applies its objects; it returns the Worker's http address.
func importTemplate(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(runDir, "templates")
	if why, err := os.ReadFile(filepath.Join(dir, templatesSkipped)); err == nil {
		t.Skipf("templates not built: %s", why)
	}
	return importApply(t, wrangler.Options{Path: filepath.Join(dir, name), Bundle: filepath.Join(dir, name+"-bundle"),
		Namespace: sampleNS, Image: registryHost + "/realnode/" + name + ":1"})
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

// TestTemplatesServe: the three templates, built with npm and wrangler, imported with
// --image and pulled by containerd from the node's registry, answer as on the local
// cluster (test/e2e templates_test.go has the reasons of each expected value).
func TestTemplatesServe(t *testing.T) {
	requireNode(t)
	t.Run("hello-world-do", func(t *testing.T) {
		url := importTemplate(t, "hello-world-do-template")
		// src/index.ts: the Durable Object answers SELECT 'Hello, World!' from its SQLite storage.
		if a := request(t, url+"/greet", nil); a.status != 200 || a.body != "Hello, World!" {
			t.Errorf("GET /greet: %d %q", a.status, a.body)
		}
	})
	t.Run("vite-react", func(t *testing.T) {
		url := importTemplate(t, "vite-react-template")
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
	})
	t.Run("astro-blog", func(t *testing.T) {
		url := importTemplate(t, "astro-blog-starter-template")
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
	})
}
