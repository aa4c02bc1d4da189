package cache_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/cache"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/sidecartest"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// result is the test Worker's answer.
type result struct {
	OK      bool              `json:"ok"`
	Error   string            `json:"error"`
	Hit     bool              `json:"hit"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Deleted bool              `json:"deleted"`
	From    string            `json:"from"`
}

type pod struct {
	t       *testing.T
	base    string
	r2Calls atomic.Int64
}

// startPod runs the test Worker (testdata/worker.js) on the pinned workerd with its
// sidecar: the Cache API's cache and, as the origin of /object, R2Bucket "origin" on
// versitygw, whose calls the pod counts.
func startPod(t *testing.T) (*pod, testenv.S3) {
	t.Helper()
	p := &pod{t: t}
	s3 := testenv.StartS3(t, "origin")
	addr := sidecartest.StartSidecar(t, sidecartest.Sidecar{S3: s3, Buckets: []string{"origin"}, WrapR2: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.r2Calls.Add(1); h.ServeHTTP(w, r) })
	}})
	src, err := os.ReadFile("testdata/worker.js")
	if err != nil {
		t.Fatal(err)
	}
	w := sidecartest.InlineWorker("cachetest", string(src), v1alpha1.Binding{Name: "BUCKET", R2Bucket: &v1alpha1.LocalObjectReference{Name: "origin"}})
	out, err := render.Render(render.Input{Worker: w, R2Buckets: map[string]render.R2BucketTarget{"origin": {Endpoint: s3.Endpoint, Bucket: "origin", SecretName: "s"}}})
	if err != nil {
		t.Fatal(err)
	}
	p.base = sidecartest.StartWorker(t, addr, w, out)
	return p, s3
}

func (p *pod) do(path string, body map[string]any) result {
	p.t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(p.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var r result
	if err := json.Unmarshal(raw, &r); err != nil {
		p.t.Fatalf("%s: %v: %s", path, err, raw)
	}
	if r.Error != "" && path != "/put" {
		p.t.Fatalf("%s %s threw: %s", path, b, r.Error)
	}
	return r
}

// TestCacheRules: one put and one match per documented rule, through the Cache API of
// the real workerd (cache.DocCacheAPI, cache.DocCacheControl, cache.DocEdgeTTL).
func TestCacheRules(t *testing.T) {
	p, _ := startPod(t)
	past, future := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	type m = map[string]any
	type hs = map[string]string
	cases := []struct {
		name, doc      string
		status         int
		headers        hs
		putReq, getReq hs
		ns             string
		hit            bool
		wantStatus     int
		check          func(t *testing.T, r result)
	}{
		{name: "max-age stores", doc: cache.DocCacheControl, headers: hs{"cache-control": "max-age=60"}, hit: true, wantStatus: 200},
		{name: "s-maxage wins over max-age", doc: cache.DocCacheControl, headers: hs{"cache-control": "s-maxage=0, max-age=60"}},
		{name: "no-store is not stored", doc: cache.DocCacheControl, headers: hs{"cache-control": "no-store"}},
		{name: "private is not stored", doc: cache.DocCacheControl, headers: hs{"cache-control": "private, max-age=60"}},
		{name: "no-cache is not stored", doc: cache.DocCacheControl, headers: hs{"cache-control": "no-cache"}},
		{name: "Set-Cookie is never stored", doc: cache.DocCacheAPI, headers: hs{"cache-control": "max-age=60", "set-cookie": "a=b"}},
		{name: "private=Set-Cookie stores without the cookie", doc: cache.DocCacheAPI, headers: hs{"cache-control": "private=Set-Cookie, max-age=60", "set-cookie": "a=b"}, hit: true, wantStatus: 200,
			check: func(t *testing.T, r result) {
				if _, ok := r.Headers["set-cookie"]; ok {
					t.Fatalf("the cached response kept Set-Cookie: %v", r.Headers)
				}
			}},
		{name: "ETag answers If-None-Match with 304", doc: cache.DocCacheAPI, headers: hs{"cache-control": "max-age=60", "etag": `"v1"`}, getReq: hs{"if-none-match": `"v1"`}, hit: true, wantStatus: 304},
		{name: "a different If-None-Match gets the body", doc: cache.DocCacheAPI, headers: hs{"cache-control": "max-age=60", "etag": `"v1"`}, getReq: hs{"if-none-match": `"v2"`}, hit: true, wantStatus: 200},
		{name: "Last-Modified answers If-Modified-Since with 304", doc: cache.DocCacheAPI, headers: hs{"cache-control": "max-age=60", "last-modified": past}, getReq: hs{"if-modified-since": future}, hit: true, wantStatus: 304},
		{name: "Vary: Accept-Encoding keys on the encoding (miss)", doc: cache.DocCacheControl, headers: hs{"cache-control": "max-age=60", "vary": "Accept-Encoding"}, putReq: hs{"accept-encoding": "gzip"}, getReq: hs{"accept-encoding": "br"}},
		{name: "Vary: Accept-Encoding keys on the encoding (hit)", doc: cache.DocCacheControl, headers: hs{"cache-control": "max-age=60", "vary": "Accept-Encoding"}, putReq: hs{"accept-encoding": "gzip"}, getReq: hs{"accept-encoding": "gzip"}, hit: true, wantStatus: 200},
		{name: "other Vary values are not considered", doc: cache.DocCacheControl, headers: hs{"cache-control": "max-age=60", "vary": "Accept"}, putReq: hs{"accept": "application/json"}, getReq: hs{"accept": "text/html"}, hit: true, wantStatus: 200},
		{name: "200 without directives: edge TTL 120 min", doc: cache.DocEdgeTTL, hit: true, wantStatus: 200},
		{name: "404 without directives: edge TTL 3 min", doc: cache.DocEdgeTTL, status: 404, hit: true, wantStatus: 404},
		{name: "500 without directives is not cached", doc: cache.DocEdgeTTL, status: 500},
		{name: "Expires in the past is not stored", doc: cache.DocCacheAPI, headers: hs{"expires": past}},
		{name: "Expires in the future stores", doc: cache.DocCacheAPI, headers: hs{"expires": future}, hit: true, wantStatus: 200},
		{name: "caches.open is its own namespace", doc: cache.DocCacheAPI, headers: hs{"cache-control": "max-age=60"}, ns: "custom:cache", hit: true, wantStatus: 200},
		{name: "Range answers 206", doc: cache.DocCacheAPI, headers: hs{"cache-control": "max-age=60"}, getReq: hs{"range": "bytes=0-4"}, hit: true, wantStatus: 206,
			check: func(t *testing.T, r result) {
				if r.Body != "hello" || r.Headers["content-range"] != "bytes 0-4/11" {
					t.Fatalf("range: %q %v", r.Body, r.Headers)
				}
			}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Logf("documented at %s", tc.doc)
			url := "https://example.com/rule/" + string(rune('a'+i))
			put := p.do("/put", m{"url": url, "ns": tc.ns, "status": tc.status, "headers": tc.headers, "reqHeaders": tc.putReq, "body": "hello world"})
			if !put.OK {
				t.Fatalf("put threw: %s", put.Error)
			}
			r := p.do("/match", m{"url": url, "ns": tc.ns, "reqHeaders": tc.getReq})
			if r.Hit != tc.hit || (tc.hit && r.Status != tc.wantStatus) {
				t.Fatalf("match: hit %v status %d, want hit %v status %d (%+v)", r.Hit, r.Status, tc.hit, tc.wantStatus, r)
			}
			if tc.hit && tc.wantStatus == 200 && r.Body != "hello world" {
				t.Fatalf("body %q", r.Body)
			}
			if tc.ns != "" && p.do("/match", m{"url": url}).Hit {
				t.Fatal("an entry of caches.open(...) matched in caches.default")
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
	t.Run("delete", func(t *testing.T) {
		url := "https://example.com/delete"
		p.do("/put", m{"url": url, "headers": hs{"cache-control": "max-age=60"}, "body": "x"})
		if !p.do("/delete", m{"url": url}).Deleted || p.do("/match", m{"url": url}).Hit || p.do("/delete", m{"url": url}).Deleted {
			t.Fatal("delete: want true, then a miss, then false")
		}
	})
	t.Run("Vary: * is refused by put", func(t *testing.T) {
		r := p.do("/put", m{"url": "https://example.com/vary-star", "headers": hs{"vary": "*"}})
		if !strings.Contains(r.Error, "Vary: *") {
			t.Fatalf("put with Vary: *: %+v", r)
		}
	})
}

// TestHitSkipsOrigin: a Worker reading an R2 object through the Cache API calls the
// origin (R2, counted at the sidecar's gateway) on the first request only; the second
// is served from the cache without any call to the origin.
func TestHitSkipsOrigin(t *testing.T) {
	p, s3 := startPod(t)
	if _, err := s3.Client.PutObject(context.Background(), "origin", "logo.svg", strings.NewReader("<svg/>"), 6, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	first := p.do("/object", map[string]any{"key": "logo.svg"})
	calls := p.r2Calls.Load()
	if first.From != "origin" || first.Body != "<svg/>" || calls != 1 {
		t.Fatalf("first request: %+v after %d origin calls, want from origin after 1", first, calls)
	}
	second := p.do("/object", map[string]any{"key": "logo.svg"})
	if second.From != "cache" || second.Body != "<svg/>" || p.r2Calls.Load() != calls {
		t.Fatalf("second request: %+v, origin calls %d -> %d; want from cache with no origin call", second, calls, p.r2Calls.Load())
	}
}
