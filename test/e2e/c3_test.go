package e2e

import (
	"archive/tar"
	"io"
	"mime"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/workerd-operator/workerd-operator/internal/bundleimage"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestCreateCloudflare: the projects `npm create cloudflare` (hack/create-cloudflare.sh
// pins the version) makes with its React, TanStack Start (React with server-side
// rendering) and Vue options, all built with @cloudflare/vite-plugin, import unchanged,
// their asset image holds exactly the files wrangler's own dry run lists for upload
// (no server bundle, no generated wrangler.json, no .vite/), and their start page
// answers 200 as HTML with the scripts and stylesheets it names served byte for byte
// with their types. C3's React Router option is not here: create-react-router copies its
// template from GitHub, which this machine does not reach.
func TestCreateCloudflare(t *testing.T) {
	for _, tc := range []struct {
		framework string
		flags     []string
		// spa: the start page is the build's index.html (not_found_handling
		// single-page-application); otherwise the Worker renders it.
		spa bool
	}{
		{framework: "react", flags: []string{"--variant=react-ts"}, spa: true},
		{framework: "tanstack-start"},
		{framework: "vue", spa: true},
	} {
		t.Run(tc.framework, func(t *testing.T) {
			start := time.Now()
			src, err := testenv.CreateCloudflare(tc.framework, tc.flags...)
			if err != nil {
				t.Fatal(err)
			}
			project, bundle := buildProject(t, src)
			t.Logf("generated and built in %s", time.Since(start).Round(time.Second))
			want, err := testenv.WranglerAssetUploads(project)
			if err != nil {
				t.Fatal(err)
			}
			res := importAndApply(t, project, bundle)
			if got := packedAssets(t, res.Image, res.Worker.Spec.Source.Image.Image); !slices.Equal(got, want) {
				t.Errorf("asset image holds\n  %q\nwrangler uploads\n  %q", got, want)
			}
			t.Logf("wrangler uploads %d asset files: %q", len(want), want)
			checkStartPage(t, serviceURL(t, res.Worker.Name), res.Image.AssetsDir, tc.spa)
			t.Logf("passed in %s", time.Since(start).Round(time.Second))
		})
	}
}

// packedAssets rebuilds the image import packed (the build is reproducible: its digest
// must be the one the Worker runs, pinned) and lists the files under its asset path.
func packedAssets(t *testing.T, b *bundleimage.Bundle, pinned string) []string {
	t.Helper()
	img, _, err := bundleimage.Build(*b)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := img.Digest(); err != nil || !strings.HasSuffix(pinned, "@"+d.String()) {
		t.Fatalf("rebuilt image %v (%v) is not the pushed %s", d, err, pinned)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	var files []string
	for tr := tar.NewReader(rc); ; {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimPrefix(h.Name, "/")
		if rel, ok := strings.CutPrefix(name, bundleimage.AssetsPath+"/"); ok && h.Typeflag != tar.TypeDir {
			files = append(files, rel)
		}
	}
	sort.Strings(files)
	return files
}

// assetRef finds the scripts and stylesheets a Vite-built page loads from /assets/.
var assetRef = regexp.MustCompile(`(?:src|href)="(/assets/[^"]+\.(?:js|css))"`)

// checkStartPage: GET / (a browser's navigation) is 200 text/html — for a single-page
// application the build's index.html itself — and every /assets/ script and stylesheet
// it names is the built file, byte for byte, as text/javascript (RFC 9239) or text/css.
func checkStartPage(t *testing.T, url, assetsDir string, spa bool) {
	t.Helper()
	r := getOK(t, url+"/", map[string]string{"Sec-Fetch-Mode": "navigate"})
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("GET /: Content-Type %q, want text/html", ct)
	}
	if spa {
		index, err := os.ReadFile(filepath.Join(assetsDir, "index.html"))
		if err != nil {
			t.Fatal(err)
		}
		if string(r.body) != string(index) {
			t.Errorf("GET / = %.300q, want the build's index.html %.300q", r.body, index)
		}
	}
	refs := assetRef.FindAllSubmatch(r.body, -1)
	if len(refs) == 0 {
		t.Fatalf("GET / names no /assets/ script or stylesheet:\n%.2000s", r.body)
	}
	types := map[string]string{".js": "text/javascript", ".css": "text/css"}
	for _, m := range refs {
		p := string(m[1])
		want, err := os.ReadFile(filepath.Join(assetsDir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		got := getOK(t, url+p, nil)
		ct := got.header.Get("Content-Type")
		if mt, _, _ := mime.ParseMediaType(ct); string(got.body) != string(want) || mt != types[path.Ext(p)] {
			t.Errorf("GET %s: %s, %d bytes; want the %d-byte file as %s", p, ct, len(got.body), len(want), types[path.Ext(p)])
		}
	}
}
