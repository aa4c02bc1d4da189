package r2_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/sidecartest"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// harness: a real S3 server (versitygw), a sidecar with the R2 gateway for its bucket
// "photos", and the pinned workerd running the rendered config of a Worker whose
// binding BUCKET is r2Bucket "photos" (testdata/worker.js).
type harness struct {
	t    testing.TB
	s3   testenv.S3
	base string
}

const bucketName = "photos"

func newHarness(t testing.TB) *harness {
	t.Helper()
	s3 := testenv.StartS3(t, bucketName)
	addr := startSidecar(t, s3, bucketName)
	src, err := os.ReadFile("testdata/worker.js")
	if err != nil {
		t.Fatal(err)
	}
	w := sidecartest.InlineWorker("r2test", string(src), v1alpha1.Binding{Name: "BUCKET", R2Bucket: &v1alpha1.LocalObjectReference{Name: bucketName}})
	out, err := render.Render(render.Input{Worker: w, R2Buckets: map[string]render.R2BucketTarget{
		bucketName: {Endpoint: s3.Endpoint, Bucket: bucketName, SecretName: "s3-credentials"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, s3: s3, base: startWorker(t, addr, w, out)}
}

func startSidecar(t testing.TB, s3 testenv.S3, buckets ...string) string {
	return sidecartest.StartSidecar(t, sidecartest.Sidecar{S3: s3, Buckets: buckets})
}

func startWorker(t testing.TB, sidecarAddr string, w *v1alpha1.Worker, out *render.Output) string {
	return sidecartest.StartWorker(t, sidecarAddr, w, out)
}

// reply is the test Worker's answer.
type reply struct {
	OK     bool            `json:"ok"`
	Error  string          `json:"error"`
	Result json.RawMessage `json:"result"`
}

// post sends body to the Worker's path and decodes its reply.
func (h *harness) post(path string, body any) reply {
	h.t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(h.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil {
		h.t.Fatalf("%s %s: %v: %s", path, b, err, raw)
	}
	return r
}

// call runs env.BUCKET[method](args...) in the Worker.
func (h *harness) call(method string, args ...any) reply {
	h.t.Helper()
	return h.post("/call", map[string]any{"method": method, "args": args})
}

// object is what the test Worker shows of an R2Object / R2ObjectBody.
type object struct {
	Key            string            `json:"key"`
	Version        string            `json:"version"`
	Size           int64             `json:"size"`
	Etag           string            `json:"etag"`
	HTTPEtag       string            `json:"httpEtag"`
	Uploaded       int64             `json:"uploaded"`
	HTTPMetadata   map[string]string `json:"httpMetadata"`
	CustomMetadata map[string]string `json:"customMetadata"`
	Range          map[string]int64  `json:"range"`
	Checksums      map[string]string `json:"checksums"`
	StorageClass   string            `json:"storageClass"`
	Body           *string           `json:"body"`
}

type listing struct {
	Objects           []object `json:"objects"`
	Truncated         bool     `json:"truncated"`
	Cursor            string   `json:"cursor"`
	DelimitedPrefixes []string `json:"delimitedPrefixes"`
}

func decode[T any](t testing.TB, r reply) T {
	t.Helper()
	var v T
	if !r.OK {
		t.Fatalf("the call threw: %s", r.Error)
	}
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatalf("%v: %s", err, r.Result)
	}
	return v
}
