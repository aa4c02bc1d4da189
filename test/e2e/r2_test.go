package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/devcluster"
)

// TestR2DevSample: the R2 sample of `make dev` (config/dev/r2: versitygw as a pod, an
// R2Bucket on it, the photos Worker) becomes Ready on the dev cluster; an object put
// through the Worker's R2 binding is listed and read back, the second read from the
// pod's Cache API.
func TestR2DevSample(t *testing.T) {
	ctx := context.Background()
	objs, err := devcluster.ReadManifests(filepath.Join(repoRoot, "config", "dev", "r2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		o.SetNamespace(sampleNS)
	}
	if err := cluster.Apply(ctx, objs, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitReady(ctx, objs, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			podLogs(t, "s3", "photos")
		}
	})
	url := serviceURL(t, "photos")
	req, _ := http.NewRequest(http.MethodPut, url+"/cat.txt", strings.NewReader("meow"))
	req.Header.Set("Content-Type", "text/plain")
	if res, body := do(t, req); res.StatusCode != http.StatusCreated || !strings.Contains(body, `"size":4`) {
		t.Fatalf("PUT: %s %s", res.Status, body)
	}
	res, body := do(t, mustGet(url+"/"))
	var keys []struct{ Key string }
	if err := json.Unmarshal([]byte(body), &keys); err != nil || len(keys) != 1 || keys[0].Key != "cat.txt" {
		t.Fatalf("list: %s %s", res.Status, body)
	}
	// The Worker stores the answer with ctx.waitUntil(cache.put(...)), which runs after the
	// response is sent (https://developers.cloudflare.com/workers/runtime-apis/context/#waituntil):
	// the first read misses, and a later one hits once the put has finished.
	if got := getCat(t, url); got != "miss" {
		t.Fatalf("first GET: x-cache %q, want miss", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for getCat(t, url) != "hit" {
		if time.Now().After(deadline) {
			t.Fatal("GET never answered from the Cache API (x-cache: hit) within 10s of the first read")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getCat reads cat.txt through the photos Worker and returns its x-cache header, failing on
// any answer that is not the stored object.
func getCat(t *testing.T, url string) string {
	t.Helper()
	res, body := do(t, mustGet(url+"/cat.txt"))
	if res.StatusCode != 200 || body != "meow" || res.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("GET: %s %q %v", res.Status, body, res.Header)
	}
	return res.Header.Get("X-Cache")
}

func mustGet(url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return req
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// podLogs logs the containers' logs of the pods whose names start with the prefixes.
func podLogs(t *testing.T, prefixes ...string) { podLogLines(t, "", prefixes...) }
