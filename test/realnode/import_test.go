package realnode

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// siteProject is a wrangler project with a Worker and static assets
// (https://developers.cloudflare.com/workers/static-assets/).
var siteProject = map[string]string{
	"wrangler.json": `{"name": "rn-site", "main": "src/index.js", "compatibility_date": "2025-10-08",
  "assets": {"directory": "public", "not_found_handling": "single-page-application", "run_worker_first": ["/api/*"]}}`,
	"src/index.js":      `export default { fetch(req) { return new Response("api: " + new URL(req.url).pathname); } };`,
	"public/index.html": "<!doctype html><p>realnode shell</p>\n",
	"public/app.js":     "console.log('app');\n",
}

// TestImportedProjectServes: a wrangler project imported with --image, pushed to the
// node's registry, is pulled by containerd (image volumes for the modules and the
// assets) and serves its assets and its Worker on the real node.
func TestImportedProjectServes(t *testing.T) {
	requireNode(t)
	dir := t.TempDir()
	for name, data := range siteProject {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := importApply(t, wrangler.Options{Path: dir, Namespace: sampleNS, Image: registryHost + "/realnode/site:1"})
	for _, c := range siteCases {
		t.Run(c.name, func(t *testing.T) { c.check(t, base) })
	}
}

// siteURL is the Worker Service's http address.
func siteURL(t *testing.T, name string) string {
	svc, err := cluster.client.CoreV1().Services(sampleNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port, _ := httpPort(svc)
	return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port.Port)))
}

type siteCase struct {
	name                      string
	path, secFetchMode        string
	wantStatus                int
	wantBody, wantContentType string
}

func (c siteCase) check(t *testing.T, base string) {
	var status int
	var body, ctype string
	eventually(t, time.Minute, "GET "+c.path, func() error {
		req, _ := http.NewRequest(http.MethodGet, base+c.path, nil)
		if c.secFetchMode != "" {
			req.Header.Set("Sec-Fetch-Mode", c.secFetchMode)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		status, body, ctype = resp.StatusCode, string(b), resp.Header.Get("Content-Type")
		return err
	})
	if status != c.wantStatus || !strings.Contains(body, c.wantBody) || !strings.HasPrefix(ctype, c.wantContentType) {
		t.Errorf("GET %s: %d %q (%s), want %d %q (%s)", c.path, status, body, ctype, c.wantStatus, c.wantBody, c.wantContentType)
	}
}

var siteCases = []siteCase{
	{name: "index", path: "/", wantStatus: 200, wantBody: "realnode shell", wantContentType: "text/html"},
	// https://developers.cloudflare.com/workers/static-assets/routing/single-page-application/
	// (a navigation to a path with no file gets index.html)
	{name: "spa-fallback", path: "/some/route", secFetchMode: "navigate", wantStatus: 200, wantBody: "realnode shell", wantContentType: "text/html"},
	{name: "script", path: "/app.js", wantStatus: 200, wantBody: "console.log('app')", wantContentType: "text/javascript"},
	// https://developers.cloudflare.com/workers/static-assets/binding/#run_worker_first
	{name: "worker-first", path: "/api/x", wantStatus: 200, wantBody: "api: /api/x"},
}
