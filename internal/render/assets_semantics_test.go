package render_test

import (
	"context"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// Cloudflare's documentation pages each case cites.
const (
	docRouting      = "https://developers.cloudflare.com/workers/static-assets/routing/"
	docHTMLHandling = "https://developers.cloudflare.com/workers/static-assets/routing/advanced/html-handling/"
	docSPA          = "https://developers.cloudflare.com/workers/static-assets/routing/single-page-application/"
	docSSG          = "https://developers.cloudflare.com/workers/static-assets/routing/static-site-generation/"
	docWorkerScript = "https://developers.cloudflare.com/workers/static-assets/routing/worker-script/"
	docBinding      = "https://developers.cloudflare.com/workers/static-assets/binding/"
	docRedirects    = "https://developers.cloudflare.com/workers/static-assets/redirects/"
	docHeaders      = "https://developers.cloudflare.com/workers/static-assets/headers/"
)

// siteFiles is the asset directory every case serves: the html-handling page's tree
// (file.html, folder/index.html) plus an SPA shell, 404 pages and typed files.
var siteFiles = map[string]string{
	"index.html":        "<h1>home</h1>",
	"file.html":         "<p>file</p>",
	"folder/index.html": "<p>folder</p>",
	"404.html":          "<p>root 404</p>",
	"blog/404.html":     "<p>blog 404</p>",
	"blog/post.html":    "<p>post</p>",
	"assets/app.js":     "console.log('app');",
	"static/styles.css": "body{}",
	"static/image.jpg":  "jpeg",
	"secure/page.html":  "<p>secure</p>",
	"movies/alien.html": "<p>alien</p>",
	"shadowed.html":     "<p>shadowed</p>",
	"data.json":         `{"ok":true}`,
	"b.html":            "<p>b</p>",
	"c.html":            "<p>c</p>",
}

// assetsWorker answers "worker <path>" and fetches /via-binding/<rest> from the assets
// binding, so a case can tell which side answered.
const assetsWorker = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname.startsWith("/via-binding/")) {
      return env.ASSETS.fetch(new Request(new URL(url.pathname.slice("/via-binding".length), url), request));
    }
    return new Response("worker " + url.pathname, { headers: { "x-from": "worker" } });
  },
};
`

// assetReq is one request and what Cloudflare's documentation says it gets.
type assetReq struct {
	doc      string // the page that states the behaviour
	path     string
	navigate bool              // a browser navigation: Sec-Fetch-Mode: navigate
	header   map[string]string // more request headers
	status   int
	body     string            // exact body; "" checks none
	noBody   bool              // the body is empty
	location string            // Location of a redirect
	lands    string            // where following the redirects ends (a 200 there)
	mimeType string            // Content-Type's media type, parameters aside
	want     map[string]string // response headers, exact
}

// assetConfig is one spec.assets and the requests it is checked with.
type assetConfig struct {
	name   string
	assets v1alpha1.WorkerAssets
	reqs   []assetReq
	// assetsOnly leaves spec.source out: no Worker script.
	assetsOnly bool
}

func redirect(doc, path string, status int, to string) assetReq {
	return assetReq{doc: doc, path: path, status: status, location: to}
}

// landsAt is a redirect (status) whose chain of redirects ends at path to. The
// html-handling page's auto-trailing-slash table sends /folder.html, /folder/index and
// /folder/index.html "307 to /folder", which its row /folder sends "307 to /folder/";
// Cloudflare's asset-worker (workers-sdk asset-worker/src/handler.ts) goes to /folder/
// in one hop, so the case checks the first status and where the chain ends.
func landsAt(doc, path string, status int, to string) assetReq {
	return assetReq{doc: doc, path: path, status: status, lands: to}
}

func served(doc, path, body string) assetReq {
	return assetReq{doc: doc, path: path, status: http.StatusOK, body: body}
}

func toWorker(doc, path string) assetReq {
	return assetReq{doc: doc, path: path, status: http.StatusOK, body: "worker " + path, want: map[string]string{"x-from": "worker"}}
}

// htmlHandlingConfigs are the four tables of the html-handling page, row by row, for
// the tree file.html and folder/index.html. A row "depends on not_found_handling" goes
// to the Worker here (not_found_handling none, and a Worker script exists).
func htmlHandlingConfigs() []assetConfig {
	d := docHTMLHandling
	return []assetConfig{
		{name: "auto-trailing-slash (default)", reqs: []assetReq{
			served(d, "/file", "<p>file</p>"),
			redirect(d, "/file.html", 307, "/file"),
			redirect(d, "/file/", 307, "/file"),
			redirect(d, "/file/index", 307, "/file"),
			redirect(d, "/file/index.html", 307, "/file"),
			redirect(d, "/folder", 307, "/folder/"),
			landsAt(d, "/folder.html", 307, "/folder/"),
			served(d, "/folder/", "<p>folder</p>"),
			landsAt(d, "/folder/index", 307, "/folder/"),
			landsAt(d, "/folder/index.html", 307, "/folder/"),
		}},
		{name: "force-trailing-slash", assets: v1alpha1.WorkerAssets{HTMLHandling: v1alpha1.HTMLForceTrailingSlash}, reqs: []assetReq{
			redirect(d, "/file", 307, "/file/"),
			redirect(d, "/file.html", 307, "/file/"),
			served(d, "/file/", "<p>file</p>"),
			redirect(d, "/file/index", 307, "/file/"),
			redirect(d, "/file/index.html", 307, "/file/"),
			redirect(d, "/folder", 307, "/folder/"),
			redirect(d, "/folder.html", 307, "/folder/"),
			served(d, "/folder/", "<p>folder</p>"),
			redirect(d, "/folder/index", 307, "/folder/"),
			redirect(d, "/folder/index.html", 307, "/folder/"),
		}},
		{name: "drop-trailing-slash", assets: v1alpha1.WorkerAssets{HTMLHandling: v1alpha1.HTMLDropTrailingSlash}, reqs: []assetReq{
			served(d, "/file", "<p>file</p>"),
			redirect(d, "/file.html", 307, "/file"),
			redirect(d, "/file/", 307, "/file"),
			redirect(d, "/file/index", 307, "/file"),
			redirect(d, "/file/index.html", 307, "/file"),
			served(d, "/folder", "<p>folder</p>"),
			redirect(d, "/folder.html", 307, "/folder"),
			redirect(d, "/folder/", 307, "/folder"),
			redirect(d, "/folder/index", 307, "/folder"),
			redirect(d, "/folder/index.html", 307, "/folder"),
		}},
		{name: "none", assets: v1alpha1.WorkerAssets{HTMLHandling: v1alpha1.HTMLNone}, reqs: []assetReq{
			toWorker(d, "/file"),
			served(d, "/file.html", "<p>file</p>"),
			toWorker(d, "/file/"),
			toWorker(d, "/file/index"),
			toWorker(d, "/file/index.html"),
			toWorker(d, "/folder"),
			toWorker(d, "/folder.html"),
			toWorker(d, "/folder/"),
			toWorker(d, "/folder/index"),
			served(d, "/folder/index.html", "<p>folder</p>"),
		}},
	}
}

// notFoundConfigs: single-page-application and 404-page, with and without
// run_worker_first patterns, and the assets binding.
func notFoundConfigs() []assetConfig {
	return []assetConfig{
		{name: "single-page-application", assets: v1alpha1.WorkerAssets{NotFoundHandling: v1alpha1.NotFoundSPA, Binding: "ASSETS"}, reqs: []assetReq{
			// A navigation that matches no file gets /index.html with 200 ...
			{doc: docSPA, path: "/dashboard/settings", navigate: true, status: 200, body: "<h1>home</h1>"},
			// ... a file still gets the file ...
			{doc: docSPA, path: "/assets/app.js", status: 200, body: "console.log('app');"},
			// ... and a request that is not a navigation (a missing script) reaches the
			// Worker script, as any request no asset matches.
			toWorker(docWorkerScript, "/assets/missing.js"),
			toWorker(docWorkerScript, "/api/users"),
			// Through the binding, not_found_handling applies: the SPA shell.
			{doc: docBinding, path: "/via-binding/nowhere", status: 200, body: "<h1>home</h1>"},
			{doc: docBinding, path: "/via-binding/file", status: 200, body: "<p>file</p>"},
		}},
		{name: "single-page-application with run_worker_first patterns", assets: v1alpha1.WorkerAssets{
			NotFoundHandling: v1alpha1.NotFoundSPA, RunWorkerFirst: []string{"/api/*", "!/api/docs/*"}}, reqs: []assetReq{
			toWorker(docSPA, "/api/name"),
			// "!" excludes /api/docs/* from the Worker; the patterns also turn off the
			// navigation detection, so any unmatched path gets the SPA shell.
			{doc: docSPA, path: "/api/docs/intro", status: 200, body: "<h1>home</h1>"},
			{doc: docSPA, path: "/dashboard", status: 200, body: "<h1>home</h1>"},
			{doc: docSPA, path: "/assets/missing.js", status: 200, body: "<h1>home</h1>"},
			served(docSPA, "/file", "<p>file</p>"),
		}},
		{name: "404-page", assets: v1alpha1.WorkerAssets{NotFoundHandling: v1alpha1.NotFound404Page}, reqs: []assetReq{
			// The nearest 404.html, with status 404.
			{doc: docSSG, path: "/blog/missing", navigate: true, status: 404, body: "<p>blog 404</p>"},
			{doc: docSSG, path: "/nowhere/deep", navigate: true, status: 404, body: "<p>root 404</p>"},
			served(docSSG, "/blog/post", "<p>post</p>"),
		}},
		{name: "run_worker_first true", assets: v1alpha1.WorkerAssets{RunWorkerFirst: []string{"/*"}, Binding: "ASSETS"}, reqs: []assetReq{
			// Every request runs the Worker first, even one a file matches ...
			toWorker(docWorkerScript, "/file"),
			toWorker(docWorkerScript, "/"),
			// ... which may fetch the asset through the binding.
			{doc: docWorkerScript, path: "/via-binding/file", status: 200, body: "<p>file</p>"},
		}},
	}
}

// assetsOnlyConfigs: without a Worker script, not_found_handling answers every request
// no file matches, navigation or not (routing page, "Default behavior" and
// "not_found_handling").
func assetsOnlyConfigs() []assetConfig {
	d := docRouting
	return []assetConfig{
		{name: "assets only, none", assetsOnly: true, reqs: []assetReq{
			// "a null-body 404-status response"
			{doc: d, path: "/not-found", status: 404, noBody: true},
			{doc: d, path: "/assets/missing.js", status: 404, noBody: true},
			served(d, "/file", "<p>file</p>"),
		}},
		{name: "assets only, single-page-application", assetsOnly: true, assets: v1alpha1.WorkerAssets{NotFoundHandling: v1alpha1.NotFoundSPA}, reqs: []assetReq{
			{doc: d, path: "/not-found", status: 200, body: "<h1>home</h1>"},
			{doc: d, path: "/blog/doesnt/exist", navigate: true, status: 200, body: "<h1>home</h1>"},
		}},
		{name: "assets only, 404-page", assetsOnly: true, assets: v1alpha1.WorkerAssets{NotFoundHandling: v1alpha1.NotFound404Page}, reqs: []assetReq{
			{doc: d, path: "/not-found", status: 404, body: "<p>root 404</p>"},
			{doc: d, path: "/blog/doesnt/exist", status: 404, body: "<p>blog 404</p>"},
		}},
	}
}

// fileConfigs: _redirects and _headers, ETag and content types.
func fileConfigs() []assetConfig {
	r, h := docRedirects, docHeaders
	return []assetConfig{
		{name: "_redirects", assets: v1alpha1.WorkerAssets{Redirects: strings.Join([]string{
			"# comments are ignored",
			"/home301 / 301",
			"/home302 / 302",
			"/nocode /file",
			"/shadowed /file 301",
			"/trailing /trailing/ 308",
			"/blog/* https://blog.example.com/:splat",
			"/products/:code/:name /products?code=:code&name=:name",
			"/proxied /folder/ 200",
			"/a /b 200",
			"/b /c 200",
		}, "\n") + "\n"}, reqs: []assetReq{
			redirect(r, "/home301", 301, "/"),
			redirect(r, "/home302", 302, "/"),
			redirect(r, "/nocode", 302, "/file"), // 302 is the default
			// Redirects apply whether or not an asset matches.
			redirect(r, "/shadowed", 301, "/file"),
			redirect(r, "/trailing", 308, "/trailing/"),
			redirect(r, "/blog/2024/hello", 302, "https://blog.example.com/2024/hello"),
			redirect(r, "/products/42/lamp", 302, "/products?code=42&name=lamp"),
			// 200 proxies: the destination's content at the source's URL.
			served(r, "/proxied", "<p>folder</p>"),
			// Only the first matching rule applies: /a renders /b, /b renders /c, but /a
			// does not render /c.
			served(r, "/a", "<p>b</p>"),
			served(r, "/b", "<p>c</p>"),
		}},
		{name: "_headers", assets: v1alpha1.WorkerAssets{Headers: strings.Join([]string{
			"# This is a comment",
			"/secure/page",
			"  X-Frame-Options: DENY",
			"  X-Content-Type-Options: nosniff",
			"/static/*",
			"  Access-Control-Allow-Origin: *",
			"  X-Robots-Tag: nosnippet",
			"/*",
			"  X-Robots-Tag: noindex",
			"  Content-Security-Policy: default-src 'self';",
			"/*.jpg",
			"  ! Content-Security-Policy",
			"/movies/:title",
			`  x-movie-name: You are watching ":title"`,
		}, "\n") + "\n"}, reqs: []assetReq{
			{doc: h, path: "/secure/page", status: 200, want: map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "X-Robots-Tag": "noindex"}},
			// Headers of every matching rule, a header set twice joined with ", ".
			{doc: h, path: "/static/styles.css", status: 200, want: map[string]string{"Access-Control-Allow-Origin": "*", "X-Robots-Tag": "nosnippet, noindex"}},
			// "! Name" detaches a header a more pervasive rule added.
			{doc: h, path: "/static/image.jpg", status: 200, want: map[string]string{"Content-Security-Policy": "", "Access-Control-Allow-Origin": "*"}},
			{doc: h, path: "/file", status: 200, want: map[string]string{"Content-Security-Policy": "default-src 'self';"}},
			// Placeholders fill in from the path.
			{doc: h, path: "/movies/alien", status: 200, want: map[string]string{"x-movie-name": `You are watching "alien"`}},
			// Not applied to responses of the Worker.
			{doc: h, path: "/no-such-file", status: 200, body: "worker /no-such-file", want: map[string]string{"X-Robots-Tag": ""}},
		}},
		{name: "default headers", reqs: []assetReq{
			// Content-Type by extension, Cache-Control for revalidation.
			// (the media types of the extensions: text/javascript per RFC 9239).
			{doc: h, path: "/assets/app.js", status: 200, mimeType: "text/javascript", want: map[string]string{"Cache-Control": "public, max-age=0, must-revalidate"}},
			{doc: h, path: "/static/styles.css", status: 200, mimeType: "text/css"},
			{doc: h, path: "/data.json", status: 200, mimeType: "application/json"},
			{doc: h, path: "/static/image.jpg", status: 200, mimeType: "image/jpeg"},
			{doc: h, path: "/file", status: 200, mimeType: "text/html"},
		}},
	}
}

// TestAssetsSemantics serves siteFiles through the rendered assets service on the
// pinned workerd, one process per configuration, and checks each documented behaviour.
func TestAssetsSemantics(t *testing.T) {
	bin := testenv.WorkerdBinary(t)
	var all []assetConfig
	all = append(all, htmlHandlingConfigs()...)
	all = append(all, notFoundConfigs()...)
	all = append(all, fileConfigs()...)
	all = append(all, assetsOnlyConfigs()...)
	for _, cfg := range all {
		t.Run(cfg.name, func(t *testing.T) {
			base := startAssets(t, bin, cfg.assets, siteFiles, !cfg.assetsOnly)
			for _, r := range cfg.reqs {
				checkAssetReq(t, base, r)
			}
		})
	}
}

// TestAssetsETag: an asset's ETag answers If-None-Match with 304 and no body
// (https://developers.cloudflare.com/workers/static-assets/headers/, "ETag").
func TestAssetsETag(t *testing.T) {
	base := startAssets(t, testenv.WorkerdBinary(t), v1alpha1.WorkerAssets{}, siteFiles, true)
	res := get(t, base+"/file", nil)
	etag := res.Header.Get("ETag")
	if res.StatusCode != 200 || etag == "" {
		t.Fatalf("GET /file: status %d, ETag %q; want 200 with an ETag", res.StatusCode, etag)
	}
	again := get(t, base+"/file", map[string]string{"If-None-Match": etag})
	body, _ := io.ReadAll(again.Body)
	if again.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("If-None-Match %s: status %d body %q, want 304 and no body", etag, again.StatusCode, body)
	}
	other := get(t, base+"/file", map[string]string{"If-None-Match": `"not-the-etag"`})
	if other.StatusCode != http.StatusOK {
		t.Errorf("If-None-Match with another ETag: status %d, want 200", other.StatusCode)
	}
}

// startAssets renders a Worker with spec.assets a over files, with assetsWorker as its
// code unless !code, and starts it; it returns the http socket's base URL.
func startAssets(t *testing.T, bin string, a v1alpha1.WorkerAssets, files map[string]string, code bool) string {
	t.Helper()
	return startDir(t, bin, assetsDir(t, a, files, code))
}

// assetsDir writes startAssets's rendered config and asset files into a new directory.
func assetsDir(t *testing.T, a v1alpha1.WorkerAssets, files map[string]string, code bool) string {
	t.Helper()
	a.Image = "registry.example.com/site:1"
	w := &v1alpha1.Worker{}
	w.Name, w.Namespace = "site", "default"
	w.Spec.CompatibilityDate = "2025-10-08"
	if code {
		w.Spec.Source.Inline = &v1alpha1.InlineSource{Modules: []v1alpha1.Module{{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: ptr.To(assetsWorker)}}}
	}
	w.Spec.Assets = &a
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, podcontract.AssetsSubdir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startDir runs workerd on the config in dir; it returns the http socket's base URL.
func startDir(t *testing.T, bin, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: bin, Dir: dir})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Stop(); cancel() })
	return "http://" + l.Addrs[podcontract.HTTPSocket]
}

// noRedirects is a client that returns redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func checkAssetReq(t *testing.T, base string, r assetReq) {
	t.Helper()
	header := map[string]string{}
	for k, v := range r.header {
		header[k] = v
	}
	if r.navigate {
		header["Sec-Fetch-Mode"] = "navigate"
	}
	res := get(t, base+r.path, header)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != r.status {
		t.Errorf("GET %s: status %d, want %d (%s); body %q", r.path, res.StatusCode, r.status, r.doc, body)
		return
	}
	if r.location != "" && res.Header.Get("Location") != r.location {
		t.Errorf("GET %s: Location %q, want %q (%s)", r.path, res.Header.Get("Location"), r.location, r.doc)
	}
	if r.lands != "" {
		checkLanding(t, base, r, res)
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); r.mimeType != "" && mt != r.mimeType {
		t.Errorf("GET %s: Content-Type %q, want media type %s (%s)", r.path, res.Header.Get("Content-Type"), r.mimeType, r.doc)
	}
	if r.noBody && len(body) != 0 {
		t.Errorf("GET %s: body %q, want none (%s)", r.path, body, r.doc)
	}
	if r.body != "" && string(body) != r.body {
		t.Errorf("GET %s: body %q, want %q (%s)", r.path, body, r.body, r.doc)
	}
	for k, v := range r.want {
		if got := strings.Join(res.Header.Values(k), ", "); got != v {
			t.Errorf("GET %s: header %s %q, want %q (%s)", r.path, k, got, v, r.doc)
		}
	}
}

// checkLanding follows res's redirects (at most 3) and checks they end at r.lands
// with 200.
func checkLanding(t *testing.T, base string, r assetReq, res *http.Response) {
	t.Helper()
	for hop := 0; hop < 3 && res.StatusCode/100 == 3; hop++ {
		loc := res.Header.Get("Location")
		if loc == r.lands {
			if end := get(t, base+loc, nil); end.StatusCode != http.StatusOK {
				t.Errorf("GET %s: lands at %s with status %d, want 200 (%s)", r.path, loc, end.StatusCode, r.doc)
			}
			return
		}
		res = get(t, base+loc, nil)
	}
	t.Errorf("GET %s: redirects do not reach %s (%s)", r.path, r.lands, r.doc)
}
