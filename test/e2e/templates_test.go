package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/internal/deploy"
	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// buildProject copies the project in src into a scratch directory and builds it as a
// user does (testenv.BuildProject), for `import`; it returns the project and bundle
// directories.
func buildProject(t *testing.T, src string, opts ...testenv.BuildOption) (string, string) {
	t.Helper()
	dir, bundle, err := testenv.BuildProject(src, t.TempDir(), opts...)
	if errors.Is(err, testenv.ErrNoNode) {
		t.Skipf("the project is not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir, bundle
}

// getOK polls url until it answers 200 and returns the response.
func getOK(t *testing.T, url string, header map[string]string) response {
	t.Helper()
	var r response
	eventually(t, 2*time.Minute, "GET "+url, func() (err error) {
		r, err = fetch(url, header)
		if err == nil && r.status != 200 {
			err = fmt.Errorf("status %d: %.300s", r.status, r.body)
		}
		return err
	})
	return r
}

// TestTemplateHelloWorldDO: hello-world-do-template answers with the greeting its
// Durable Object reads from its SQLite storage ("SELECT 'Hello, World!'", src/index.ts).
func TestTemplateHelloWorldDO(t *testing.T) {
	d := deployShared(t, "hello-world-do-template")
	if n := len(d.res.Import.DurableObjectNamespaces); n != 1 {
		t.Fatalf("%d DurableObjectNamespaces deployed, want 1 (MyDurableObject)", n)
	}
	r := getOK(t, d.url+"/greet", nil)
	if got := string(r.body); got != "Hello, World!" {
		t.Errorf("GET /greet = %q, want %q", got, "Hello, World!")
	}
	runTemplateSpec(t, "hello-world-do-template", d.url)
}

// scriptSrc finds the module script of a Vite build's index.html.
var scriptSrc = regexp.MustCompile(`<script type="module" crossorigin src="(/assets/[^"]+\.js)">`)

// TestTemplateViteReact: vite-react-template (not_found_handling
// single-page-application) serves its index.html on / and on a path that is no file,
// its JavaScript asset byte for byte as text/javascript, and /api/ from the Worker
// (Hono, src/worker/index.ts).
// https://developers.cloudflare.com/workers/static-assets/routing/single-page-application/
func TestTemplateViteReact(t *testing.T) {
	d := deployShared(t, "vite-react-template")
	project, url := d.dir, d.url
	index, err := os.ReadFile(filepath.Join(project, "dist", "client", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	// A browser's navigation (Sec-Fetch-Mode: navigate) to a path that is no file gets
	// index.html; the same path fetched by a script goes to the Worker, whose router
	// answers 404 (compatibility date >= 2025-04-01, assets_navigation_prefers_asset_serving).
	navigate := map[string]string{"Sec-Fetch-Mode": "navigate"}
	for _, p := range []string{"/", "/some/client/route"} {
		r := getOK(t, url+p, navigate)
		if string(r.body) != string(index) || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %s %.200q, want dist/client/index.html as text/html", p, r.header.Get("Content-Type"), r.body)
		}
	}
	if r, err := fetch(url+"/some/client/route", nil); err != nil || r.status != 404 || string(r.body) == string(index) {
		t.Errorf("GET /some/client/route (not a navigation): status %d %.100q, %v; want the Worker's 404", r.status, r.body, err)
	}
	m := scriptSrc.FindSubmatch(index)
	if m == nil {
		t.Fatalf("no module script in index.html:\n%s", index)
	}
	js, err := os.ReadFile(filepath.Join(project, "dist", "client", string(m[1])))
	if err != nil {
		t.Fatal(err)
	}
	r := getOK(t, url+string(m[1]), nil)
	// RFC 9239: JavaScript is text/javascript.
	ct := r.header.Get("Content-Type")
	if string(r.body) != string(js) || !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("GET %s: %s, %d bytes; want the %d-byte file as JavaScript", m[1], ct, len(r.body), len(js))
	}
	r = getOK(t, url+"/api/", nil)
	if got := strings.TrimSpace(string(r.body)); got != `{"name":"Cloudflare"}` {
		t.Errorf("GET /api/ = %q, want the Worker's {\"name\":\"Cloudflare\"}", got)
	}
	runTemplateSpec(t, "vite-react-template", url)
}

// TestTemplateAstroBlog: astro-blog-starter-template serves a prerendered post page
// from its assets, answers a conditional request with its ETag by 304 Not Modified,
// and a path that is no page with Astro's 404 page (status 404) from its Worker.
// https://developers.cloudflare.com/workers/static-assets/#caching-behavior
func TestTemplateAstroBlog(t *testing.T) {
	url := deployTemplate(t, "astro-blog-starter-template")
	post := getOK(t, url+"/blog/first-post/", nil)
	if !strings.Contains(string(post.body), "<title>First post") {
		t.Errorf("GET /blog/first-post/: %.300q, want the post page", post.body)
	}
	etag := post.header.Get("ETag")
	if etag == "" {
		t.Fatalf("GET /blog/first-post/: no ETag (headers %v)", post.header)
	}
	r, err := fetch(url+"/blog/first-post/", map[string]string{"If-None-Match": etag})
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 304 || len(r.body) != 0 {
		t.Errorf("If-None-Match %s: status %d, %d bytes; want 304 and no body", etag, r.status, len(r.body))
	}
	r, err = fetch(url+"/no/such/page", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 404 || !strings.Contains(string(r.body), "404") {
		t.Errorf("GET /no/such/page: status %d %.300q, want 404 and the 404 page", r.status, r.body)
	}
	runTemplateSpec(t, "astro-blog-starter-template", url)
}

// todoID is the id TodoManager.create gives an item (crypto.randomUUID), as the page's
// toggle and delete forms carry it (app/routes/$id.tsx).
var todoID = regexp.MustCompile(`name="id" value="([0-9a-f-]{36})"`)

// TestTemplateToDoListKV: to-do-list-kv-template redirects / to a fresh list
// (/<nanoid>, app/routes/_index.tsx), and its list page's form creates, toggles and
// deletes items that a reload reads back from the KVNamespace (TodoManager keeps the
// list as JSON under the key <nanoid>, app/to-do-manager.ts); another list is empty.
// https://developers.cloudflare.com/kv/api/write-key-value-pairs/
func TestTemplateToDoListKV(t *testing.T) {
	d := deployShared(t, "to-do-list-kv-template")
	res := d.res.Import
	bound := false
	for _, b := range res.Worker.Spec.Bindings {
		bound = bound || (b.Name == "TO_DO_LIST" && b.KVNamespace != nil && len(res.KVNamespaces) == 1 &&
			b.KVNamespace.Name == res.KVNamespaces[0].Name)
	}
	if !bound {
		t.Fatalf("imported %d KVNamespaces, bindings %+v; want one, bound as TO_DO_LIST", len(res.KVNamespaces), res.Worker.Spec.Bindings)
	}
	url := d.url
	var list string
	eventually(t, 2*time.Minute, "GET / redirects to a list", func() error {
		r, err := fetch(url+"/", nil)
		if err != nil {
			return err
		}
		// nanoid(): 21 characters of A-Za-z0-9_- (https://github.com/ai/nanoid).
		list = r.header.Get("Location")
		if r.status != 302 || !regexp.MustCompile(`^/[A-Za-z0-9_-]{21}$`).MatchString(list) {
			return fmt.Errorf("status %d, Location %q", r.status, list)
		}
		return nil
	})
	page := getOK(t, url+list, nil)
	if !strings.Contains(string(page.body), "Todo List") || todoID.Match(page.body) {
		t.Fatalf("GET %s: %.500q, want the empty list page", list, page.body)
	}
	text := fmt.Sprintf("water the plants %d", time.Now().UnixNano())
	postForm(t, url+list, "intent=create&text="+strings.ReplaceAll(text, " ", "+"))
	page = getOK(t, url+list, nil)
	m := todoID.FindSubmatch(page.body)
	if !strings.Contains(string(page.body), ">"+text+"<") || m == nil {
		t.Fatalf("reload of %s after create: %.800q, want the item %q with its id", list, page.body, text)
	}
	postForm(t, url+list, "intent=toggle&id="+string(m[1]))
	if page = getOK(t, url+list, nil); !strings.Contains(string(page.body), `class="line-through text-gray-400">`+text) {
		t.Errorf("reload after toggle: %.800q, want the item struck through (completed)", page.body)
	}
	if other := getOK(t, url+"/another-list-000000000", nil); strings.Contains(string(other.body), text) {
		t.Errorf("another list shows %q: the key is the list's id", text)
	}
	postForm(t, url+list, "intent=delete&id="+string(m[1]))
	if page = getOK(t, url+list, nil); strings.Contains(string(page.body), text) || todoID.Match(page.body) {
		t.Errorf("reload after delete: %.800q, want the empty list", page.body)
	}
	runTemplateSpec(t, "to-do-list-kv-template", d.url)
}

// postForm submits a form as a browser without JavaScript does (a document POST,
// which Remix answers by running the route's action and rendering the page).
func postForm(t *testing.T, url, form string) {
	t.Helper()
	res, err := httpClient.Post(url, "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("POST %s %s: status %d %.300q", url, form, res.StatusCode, b)
	}
}

// TestTemplateR2Explorer: r2-explorer-template, deployed with --r2-endpoint on an
// S3-compatible store in the cluster (config/dev/r2's versitygw), serves its dashboard
// (node_modules/r2-explorer/dashboard, not_found_handling single-page-application) on /,
// reports its binding "bucket" at /api/server/config, lists the empty bucket, and, being
// readonly (src/index.ts), refuses an upload
// (https://r2explorer.com/getting-started/security/).
func TestTemplateR2Explorer(t *testing.T) {
	startS3(t, "r2-explorer-bucket")
	src := testenv.SharedFile(t, "testdata", "cloudflare-templates", "r2-explorer-template")
	dir, err := testenv.CopyProject(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The lockfile pins r2-explorer 1.1.10, which this machine's npm registry does not
	// serve: install the nearest patch release first (deploy then installs nothing).
	if err := testenv.Install(dir, testenv.InsteadOfMissing("r2-explorer-1.1.10.tgz", "r2-explorer@1.1.13")); err != nil {
		if errors.Is(err, testenv.ErrNoNode) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	d := deployDir(t, dir, func(o *deploy.Options) { o.R2Endpoint = "http://s3." + sampleNS + ".svc.cluster.local:7070" })
	index, err := os.ReadFile(filepath.Join(dir, "node_modules", "r2-explorer", "dashboard", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if r := getOK(t, d.url+"/", map[string]string{"Sec-Fetch-Mode": "navigate"}); string(r.body) != string(index) {
		t.Errorf("GET /: %.300q, want the dashboard's index.html", r.body)
	}
	cfg := getOK(t, d.url+"/api/server/config", nil)
	if !strings.Contains(string(cfg.body), `"buckets":[{"name":"bucket"`) {
		t.Errorf("/api/server/config: %.300s, want the binding \"bucket\"", cfg.body)
	}
	list := getOK(t, d.url+"/api/buckets/bucket?delimiter=/", nil)
	if !strings.Contains(string(list.body), `"objects":[]`) {
		t.Errorf("list of the new bucket: %.300s, want no objects", list.body)
	}
	up, err := httpClient.Post(d.url+"/api/buckets/bucket/upload?key=bmV3LnR4dA==", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	up.Body.Close()
	if up.StatusCode != http.StatusUnauthorized && up.StatusCode != http.StatusForbidden {
		t.Errorf("upload to the readonly explorer: %d, want 401 or 403", up.StatusCode)
	}
	runTemplateSpec(t, "r2-explorer-template", d.url)
}

// startS3 runs config/dev/r2's S3-compatible store (its Secret, Deployment and
// Service) with a bucket of this name, and the credentials Secret "<bucket>-s3" that
// import's R2Bucket names.
func startS3(t *testing.T, bucket string) {
	t.Helper()
	ctx := context.Background()
	store, err := devcluster.ReadS3Store(repoRoot, bucket)
	if err != nil {
		t.Fatal(err)
	}
	inits, _, _ := unstructured.NestedSlice(store.Deployment.Object, "spec", "template", "spec", "initContainers")
	c := inits[0].(map[string]any)
	c["args"] = append(c["args"].([]any), "/data/objects/"+bucket)
	_ = unstructured.SetNestedSlice(store.Deployment.Object, inits, "spec", "template", "spec", "initContainers")
	objs := store.Objects(sampleNS)
	if err := cluster.Apply(ctx, objs, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitReady(ctx, objs, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
}
