package r2_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"
)

// pattern is byte i of the large object, as testdata/worker.js fill() makes it.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7 % 251)
	}
	return b
}

// TestMultipart100MiB: a 100 MiB object in 10 MiB parts made in the Worker, completed,
// read back whole; its etag is S3's multipart form "<hash>-<parts>", its SHA-256 is the
// bytes' (multiRef). An aborted upload takes no more parts: NoSuchUpload (errCodes).
func TestMultipart100MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MiB through workerd")
	}
	h := newHarness(t)
	const size, part = 100 << 20, 10 << 20
	want := sha256.Sum256(pattern(size))
	r := h.post("/multipart", map[string]any{"key": "big", "size": size, "partSize": part})
	res := decode[struct {
		Object object `json:"object"`
		Parts  int    `json:"parts"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	}](t, r)
	if res.Parts != 10 || res.Size != size || res.SHA256 != hex.EncodeToString(want[:]) {
		t.Fatalf("multipart: %d parts, size %d, sha256 %s; want 10, %d, %x", res.Parts, res.Size, res.SHA256, size, want)
	}
	if !strings.HasSuffix(res.Object.Etag, "-10") || res.Object.CustomMetadata["parts"] != "many" {
		t.Fatalf("completed object %+v: want etag <hash>-10 and the custom metadata of createMultipartUpload", res.Object)
	}
	id := decode[struct {
		UploadID string `json:"uploadId"`
	}](t, h.call("createMultipartUpload", "aborted"))
	if r := h.post("/resume", map[string]any{"key": "aborted", "uploadId": id.UploadID, "method": "abort", "args": []any{}}); !r.OK {
		t.Fatalf("abort: %s", r.Error)
	}
	r = h.post("/resume", map[string]any{"key": "aborted", "uploadId": id.UploadID, "method": "uploadPart", "args": []any{1, "x"}})
	throws("uploadPart: The specified multipart upload does not exist. (10024)")(t, r)
}

// TestList5000Keys: 5,000 keys page by 1,000 (the default and maximum) in 5 pages and
// by 250 in 20, each key once, in UTF-8 order (apiRef list: "limit ... defaults to 1000").
func TestList5000Keys(t *testing.T) {
	h := newHarness(t)
	const n = 5000
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("k/%05d", i)
	}
	seed(t, h, want)
	for _, tc := range []struct{ limit, pages int }{{0, 5}, {250, 20}} {
		args := map[string]any{"prefix": "k/"}
		if tc.limit > 0 {
			args["limit"] = tc.limit
		}
		res := decode[struct {
			Keys  []string `json:"keys"`
			Pages int      `json:"pages"`
		}](t, h.post("/listall", args))
		if res.Pages != tc.pages || !slices.Equal(res.Keys, want) {
			t.Fatalf("limit %d: %d pages, %d keys (first %v); want %d pages, the %d keys in order", tc.limit, res.Pages, len(res.Keys), res.Keys[:min(3, len(res.Keys))], tc.pages, n)
		}
	}
}

// seed writes keys straight to the S3 server, 16 at a time.
func seed(t *testing.T, h *harness, keys []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	sem := make(chan struct{}, 16)
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := h.s3.Client.PutObject(context.Background(), bucketName, k, bytes.NewReader([]byte(k)), int64(len(k)), minio.PutObjectOptions{})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
