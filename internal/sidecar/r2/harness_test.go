package r2_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/r2"
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
	code := string(src)
	w := &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "r2test", Namespace: "default"}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2025-01-01",
		Source:            v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: &code}}}},
		Bindings:          []v1alpha1.Binding{{Name: "BUCKET", R2Bucket: &v1alpha1.LocalObjectReference{Name: bucketName}}},
	}}
	out, err := render.Render(render.Input{Worker: w, R2Buckets: map[string]render.R2BucketTarget{
		bucketName: {Endpoint: s3.Endpoint, Bucket: bucketName, SecretName: "s3-credentials"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, s3: s3, base: startWorker(t, addr, w, out)}
}

// startSidecar serves a sidecar with the R2 gateway for the buckets of s3 (each an
// R2Bucket of the same name) and answers its address.
func startSidecar(t testing.TB, s3 testenv.S3, buckets ...string) string {
	t.Helper()
	var cfg []r2.BucketConfig
	for _, b := range buckets {
		cfg = append(cfg, r2.BucketConfig{Name: b, Endpoint: s3.Endpoint, Bucket: b, AccessKeyID: s3.AccessKeyID, SecretAccessKey: s3.SecretAccessKey})
	}
	gw, err := r2.New(cfg, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sidecar.New(sidecar.Options{Addr: testenv.FreeLoopbackAddr(t), DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.HandleRoot(gw)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv.Addr()
}

// startWorker runs Worker w's rendering out on workerd with the sidecar at
// sidecarAddr; it answers the base URL of the http socket.
func startWorker(t testing.TB, sidecarAddr string, w *v1alpha1.Worker, out *render.Output) string {
	t.Helper()
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	// The context bounds workerd's whole run, not only its start.
	l, err := localrun.StartLocal(context.Background(), localrun.LocalOptions{
		Binary: testenv.WorkerdBinary(t), Dir: dir, Sockets: []string{podcontract.HTTPSocket, podcontract.RPCSocket, podcontract.HealthSocket, podcontract.TriggerSocket},
		Externals: map[string]string{podcontract.SidecarService: sidecarAddr}, SidecarAliases: render.R2Services(w),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Stop()
		if t.Failed() {
			t.Logf("workerd output:\n%s", l.Output())
		}
	})
	return "http://" + l.Addrs[podcontract.HTTPSocket]
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
