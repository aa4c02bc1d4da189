package e2e

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	chunkModules = 5
	chunkBytes   = 1 << 20 // 5 modules of 1 MiB: 5 MiB of modules
	assetFiles   = 20
	assetBytes   = 1 << 20 // 20 files of 1 MiB: 20 MiB of assets
)

// largeProject writes a wrangler project whose bundle is 5 MiB of modules that import
// each other in a chain (index.js → chunks/c0.js → ... → chunks/c4.js) and whose asset
// directory holds 20 MiB of files; it returns the project and bundle directories and
// the total length of the chunks' data strings, which /api/total answers.
func largeProject(t *testing.T) (string, string, int) {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{
		"wrangler.json": []byte(`{"name": "big-bundle", "main": "src/index.js", "compatibility_date": "2026-11-01",
  "assets": {"directory": "./public", "binding": "ASSETS", "run_worker_first": ["/api/*"]}}`),
		"public/index.html": []byte("<h1>big</h1>\n"),
		"bundle/index.js": []byte(`import { total } from "./chunks/c0.js";
export default { async fetch(req, env) {
  const u = new URL(req.url);
  if (u.pathname === "/api/total") return new Response(String(total()));
  return env.ASSETS.fetch(req);
} };
`),
	}
	rng := rand.New(rand.NewSource(21))
	total := 0
	for i := 0; i < chunkModules; i++ {
		next := fmt.Sprintf(`import { total as rest } from "./c%d.js";`, i+1)
		restCall := "rest()"
		if i == chunkModules-1 {
			next, restCall = "", "0"
		}
		head := fmt.Sprintf("%s\nexport const data%d = \"", next, i)
		tail := fmt.Sprintf("\";\nexport function total() { return data%d.length + %s; }\n", i, restCall)
		pad := make([]byte, chunkBytes-len(head)-len(tail))
		total += len(pad)
		for j := range pad {
			pad[j] = 'a' + byte(rng.Intn(26))
		}
		files[fmt.Sprintf("bundle/chunks/c%d.js", i)] = []byte(head + string(pad) + tail)
	}
	for i := 0; i < assetFiles; i++ {
		b := make([]byte, assetBytes)
		rng.Read(b)
		files[fmt.Sprintf("public/blobs/%02d.bin", i)] = b
	}
	for p, b := range files {
		f := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "bundle"), total
}

// TestLargeImageBundle: a bundle far above what an inline or ConfigMap source holds —
// 5 MiB of modules importing each other and 20 MiB of assets — imported with --image,
// pushed to the local registry, pulled by the kubelet and served: the Worker sees
// every module (the total length of their data) and every asset comes back byte for
// byte through the assets binding.
func TestLargeImageBundle(t *testing.T) {
	project, bundle, total := largeProject(t)
	res := importAndApply(t, project, bundle)
	if n := len(res.Worker.Spec.Source.Image.Modules); n != chunkModules+1 {
		t.Errorf("%d modules in spec.source.image.modules, want %d", n, chunkModules+1)
	}
	url := serviceURL(t, res.Worker.Name)
	var r response
	eventually(t, 2*time.Minute, "GET /api/total", func() (err error) {
		r, err = fetch(url+"/api/total", nil)
		if err == nil && r.status != 200 {
			err = fmt.Errorf("status %d: %.200s", r.status, r.body)
		}
		return err
	})
	if got, want := strings.TrimSpace(string(r.body)), fmt.Sprint(total); got != want {
		t.Errorf("/api/total = %q, want %s (the data of all %d chunks)", got, want, chunkModules)
	}
	for i := 0; i < assetFiles; i++ {
		name := fmt.Sprintf("blobs/%02d.bin", i)
		want, err := os.ReadFile(filepath.Join(project, "public", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fetch(url+"/"+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.status != 200 || got.sum() != (response{body: want}).sum() {
			t.Errorf("GET /%s: status %d, %d bytes; want 200 and the file's %d bytes", name, got.status, len(got.body), len(want))
		}
	}
}
