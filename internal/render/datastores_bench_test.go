package render_test

import (
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// BenchmarkDataBindings measures KV get, KV put, a D1 point query and a queue send
// (no consumer) made by Worker code, two ways: "pods", the Worker and the store's host in two workerd processes as
// the operator renders them (the binding crosses an external service over loopback; no
// TLS), and "single-process", the Worker and the same built-in Worker (kv.js, d1.js, queues.js)
// in one process, as `wrangler dev` runs them. Each iteration is one HTTP request to
// the Worker, so both include the same HTTP overhead.
// Metrics: p50-us, p99-us, ops/s (one client, sequential).
//
//	go test ./internal/render -run '^$' -bench DataBindings -benchtime 2000x
func BenchmarkDataBindings(b *testing.B) {
	bin := testenv.WorkerdBinary(b)
	for _, kind := range []render.DataKind{render.DataKV, render.DataD1, render.DataQueue} {
		ref := render.DataRef{Kind: kind, Name: "bench"}
		h := render.DataHost{Kind: kind, Namespace: "default", Name: "bench"}
		host := startDataHost(b, bin, b.TempDir(), h)
		pods := startDataClient(b, bin, map[render.DataRef]string{ref: host.Addrs[podcontract.GatewaySocket]})
		w := benchClient(b)
		stores, _ := dataBindings(w, map[render.DataRef]string{ref: ""})
		single := startHost(b, bin, b.TempDir(), render.Input{Worker: w, DataHost: &h, DataStores: stores}, nil)
		cases := map[render.DataKind][]string{render.DataKV: {"bench-kv-get", "bench-kv-put"}, render.DataD1: {"bench-d1-point"}, render.DataQueue: {"bench-q-send"}}[kind]
		for _, mode := range []struct {
			name string
			addr string
		}{{"pods", pods.Addrs[podcontract.HTTPSocket]}, {"single-process", single.Addrs[podcontract.HTTPSocket]}} {
			runCase(b, mode.addr, "bench-setup")
			for _, c := range cases {
				b.Run(c+"/"+mode.name, func(b *testing.B) { benchGet(b, "http://"+mode.addr+"/"+c) })
			}
		}
	}
}

func benchClient(b *testing.B) *v1alpha1.Worker {
	js, err := os.ReadFile(filepath.Join("testdata", "data", "conformance.js"))
	if err != nil {
		b.Fatal(err)
	}
	src := string(js)
	return &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "default"}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2025-01-01",
		Source:            v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{{Name: "main.js", Type: v1alpha1.ModuleESModule, Content: &src}}}},
	}}
}

func benchGet(b *testing.B, url string) {
	hc := &http.Client{}
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		resp, err := hc.Get(url)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%s: %v %v", url, err, resp)
		}
		_ = resp.Body.Close()
		durs = append(durs, time.Since(t0))
	}
	total := time.Since(start)
	b.StopTimer()
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-us")
	b.ReportMetric(float64(b.N)/total.Seconds(), "ops/s")
}
