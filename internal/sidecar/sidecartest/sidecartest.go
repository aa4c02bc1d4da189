// Package sidecartest runs, for tests, a pod's pair as the cluster runs it: a sidecar
// (with the R2 gateway for buckets of a test S3 server, the Workers AI gateway and the
// Cache API's cache) and
// the pinned workerd serving a rendered Worker that reaches it through the rendered
// aliases.
package sidecartest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/requestcf"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/ai"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/cache"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/r2"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// Sidecar configures StartSidecar.
type Sidecar struct {
	// S3 and Buckets: the R2 gateway serves each bucket of S3 as the R2Bucket of the
	// same name.
	S3      testenv.S3
	Buckets []string
	// WrapR2 wraps the R2 gateway (e.g. to count the calls); nil leaves it.
	WrapR2 func(http.Handler) http.Handler
	// Cache is the Cache API's cache; a default one under the test's directory when nil.
	Cache *cache.Cache
	// Outbound are the R2 and AI gateways' outbound rules (r2.Options.Outbound); nil: none.
	Outbound *outbound.Rules
	// Logf receives the R2 gateway's log; nil: t.Logf.
	Logf func(format string, args ...any)
	// AI are the Workers AI gateway's bindings; none: no AI gateway.
	AI []ai.BindingConfig
	// BodyTimeout is the sidecar's request body deadline (sidecar.Options.BodyTimeout);
	// 0 is its default.
	BodyTimeout time.Duration
	// RequestCF configures the request.cf endpoint; nil: no colo, no trusted proxy, no
	// GeoIP database, as a sidecar without --request-cf-* flags.
	RequestCF *requestcf.Config
}

// StartSidecar serves a sidecar as s says until the test ends and answers its address.
func StartSidecar(t testing.TB, s Sidecar) string {
	t.Helper()
	var cfg []r2.BucketConfig
	for _, b := range s.Buckets {
		cfg = append(cfg, r2.BucketConfig{Name: b, Endpoint: s.S3.Endpoint, Bucket: b, AccessKeyID: s.S3.AccessKeyID, SecretAccessKey: s.S3.SecretAccessKey})
	}
	logf := s.Logf
	if logf == nil {
		logf = t.Logf
	}
	gw, err := r2.New(cfg, r2.Options{Logf: logf, Outbound: s.Outbound})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cache == nil {
		if s.Cache, err = cache.New(cache.Options{Dir: t.TempDir(), MemoryBytes: cache.DefaultMemoryBytes,
			DiskBytes: cache.DefaultDiskBytes, MaxEntryBytes: cache.DefaultMaxEntryBytes}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := sidecar.New(sidecar.Options{Addr: testenv.FreeLoopbackAddr(t), DataDir: t.TempDir(), BodyTimeout: s.BodyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = gw
	if s.WrapR2 != nil {
		h = s.WrapR2(h)
	}
	srv.HandleRoot(h)
	srv.HandleMarked(podcontract.CacheHeader, s.Cache)
	if len(s.AI) > 0 {
		srv.HandleMarked(podcontract.AIBindingHeader, ai.New(s.AI, ai.Options{Logf: logf, Outbound: s.Outbound}))
	}
	if s.RequestCF == nil {
		s.RequestCF = &requestcf.Config{}
	}
	srv.Handle(podcontract.RequestCFPath, requestcf.Handler(s.RequestCF, logf))
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv.Addr()
}

// StartWorker runs Worker w's rendering out on the pinned workerd with the sidecar at
// sidecarAddr until the test ends; it answers the base URL of the http socket.
func StartWorker(t testing.TB, sidecarAddr string, w *v1alpha1.Worker, out *render.Output) string {
	t.Helper()
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	// The context bounds workerd's whole run, not only its start.
	l, err := localrun.StartLocal(context.Background(), localrun.LocalOptions{
		Binary: testenv.WorkerdBinary(t), Dir: dir, Sockets: []string{podcontract.HTTPSocket, podcontract.RPCSocket, podcontract.HealthSocket, podcontract.TriggerSocket},
		Externals: map[string]string{podcontract.SidecarService: sidecarAddr}, SidecarAliases: render.SidecarAliases(w),
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

// InlineWorker is a Worker named name of one ES module with bindings.
func InlineWorker(name, code string, bindings ...v1alpha1.Binding) *v1alpha1.Worker {
	w := &v1alpha1.Worker{Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2025-01-01",
		Source:            v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: &code}}}},
		Bindings:          bindings,
	}}
	w.Name, w.Namespace = name, "default"
	return w
}
