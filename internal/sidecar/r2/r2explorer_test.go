package r2_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"

	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// TestR2ExplorerTemplate: Cloudflare's r2-explorer template, built as its README says
// (npm, wrangler deploy --dry-run) and imported (wrangler r2_buckets -> R2Bucket), runs
// on the pinned workerd with its bucket on versitygw: its API lists the bucket, reads an
// object and, as the template sets readonly: true, refuses an upload. A real-workerd
// local run, not the dev cluster.
func TestR2ExplorerTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the template with npm and wrangler")
	}
	dir, bundle := buildR2Explorer(t)
	s3 := testenv.StartS3(t, "r2-explorer-bucket")
	res, err := wrangler.Import(wrangler.Options{Path: dir, Bundle: bundle, AssetsImage: "registry.example/r2-explorer:1", R2Endpoint: s3.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	// The dashboard's files (spec.assets, from an image) are not what this test drives:
	// its API is, from the Worker (test/e2e serves assets from images).
	res.Worker.Spec.Assets = nil
	if len(res.R2Buckets) != 1 || res.R2Buckets[0].Name != "r2-explorer-bucket" {
		t.Fatalf("import wrote R2Buckets %v, want r2-explorer-bucket", res.R2Buckets)
	}
	rs, err := localrun.RenderManifests(&localrun.Manifests{Workers: []*v1alpha1.Worker{res.Worker}, R2Buckets: res.R2Buckets}, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"docs/readme.txt": "read me", "docs/sub/deep.txt": "deep", "top.txt": "top"} {
		if _, err := s3.Client.PutObject(context.Background(), "r2-explorer-bucket", k, strings.NewReader(v), int64(len(v)), minio.PutObjectOptions{ContentType: "text/plain"}); err != nil {
			t.Fatal(err)
		}
	}
	base := startWorker(t, startSidecar(t, s3, "r2-explorer-bucket"), rs[0].Worker, rs[0].Output)

	var cfg struct {
		Buckets []struct{ Name string } `json:"buckets"`
	}
	getJSON(t, base+"/api/server/config", &cfg)
	if len(cfg.Buckets) != 1 || cfg.Buckets[0].Name != "bucket" {
		t.Fatalf("/api/server/config buckets %+v, want the binding \"bucket\"", cfg.Buckets)
	}
	// The list is the R2Objects as JSON (uploaded as a date string).
	var l struct {
		Objects []struct {
			Key  string `json:"key"`
			Size int    `json:"size"`
		} `json:"objects"`
		DelimitedPrefixes []string `json:"delimitedPrefixes"`
	}
	getJSON(t, base+"/api/buckets/bucket?delimiter=/&prefix="+base64.StdEncoding.EncodeToString([]byte("docs/")), &l)
	if len(l.Objects) != 1 || l.Objects[0].Key != "docs/readme.txt" || l.Objects[0].Size != 7 || strings.Join(l.DelimitedPrefixes, ",") != "docs/sub/" {
		t.Fatalf("list docs/: %+v", l)
	}
	res2, body := get(t, base+"/api/buckets/bucket/"+base64.StdEncoding.EncodeToString([]byte("docs/readme.txt")))
	if res2.StatusCode != 200 || body != "read me" || res2.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("get object: %d %q %q", res2.StatusCode, body, res2.Header.Get("Content-Type"))
	}
	up, err := http.Post(base+"/api/buckets/bucket/upload?key="+base64.StdEncoding.EncodeToString([]byte("new.txt")), "text/plain", bytes.NewReader([]byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	up.Body.Close()
	if up.StatusCode != http.StatusUnauthorized && up.StatusCode != http.StatusForbidden {
		t.Fatalf("upload to the readonly template: %d, want 401 or 403", up.StatusCode)
	}
	if _, err := s3.Client.StatObject(context.Background(), "r2-explorer-bucket", "new.txt", minio.StatObjectOptions{}); err == nil {
		t.Fatal("the readonly template stored an upload")
	}
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, body := get(t, url)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// buildR2Explorer builds the template as a user does (testenv.BuildProject), with
// r2-explorer 1.1.13 where its lockfile's 1.1.10 cannot be had (testenv.R2ExplorerBuild).
func buildR2Explorer(t *testing.T) (dir, bundle string) {
	t.Helper()
	src := testenv.SharedFile(t, "testdata", "cloudflare-templates", "r2-explorer-template")
	dir, bundle, err := testenv.BuildProject(src, t.TempDir(), testenv.R2ExplorerBuild)
	if errors.Is(err, testenv.ErrNoNode) {
		t.Skipf("the template is not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir, bundle
}
