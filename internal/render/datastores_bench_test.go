package render_test

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"testing"
	"time"

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
		// Every process has its own sidecar, as in a pod: without one the ingress pays a
		// failed request.cf lookup on every request.
		host := startHost(b, bin, b.TempDir(), render.Input{Worker: render.DataHostWorker(h), DataHost: &h}, withSidecar(b))
		pods := startDataWorkerWith(b, bin, dataWorker(b, "conformance.js"), map[render.DataRef]string{ref: host.Addrs[podcontract.GatewaySocket]}, withSidecar(b))
		w := dataWorker(b, "conformance.js")
		stores, _ := dataBindings(w, map[render.DataRef]string{ref: ""})
		single := startHost(b, bin, b.TempDir(), render.Input{Worker: w, DataHost: &h, DataStores: stores}, withSidecar(b))
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

// withSidecar is a new sidecar as the externals of startHost and startDataWorkerWith.
func withSidecar(b *testing.B) map[string]string {
	return map[string]string{podcontract.SidecarService: startSidecar(b)}
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

// BenchmarkQueueDelivery measures queue messages/s end to end: Worker code sends b.N
// messages (send() one by one, or sendBatch() of 100) and the consumer's queue()
// acks them (ackAll); the figure is b.N over the time from the first send until the
// consumer has acked the last one. Two ways, as BenchmarkDataBindings: "pods", the
// producer Worker in one workerd process and the Queue's host with its consumer in
// another (docs/queues.md: the consumer runs in the Queue's pod), the producer's
// binding crossing an external service over loopback; "single-process", producer,
// queues.js and consumer in one process. Consumer: maxBatchSize 100, maxBatchTimeout 0.
// Metrics: msgs/s (end to end), send-msgs/s (until the last send resolved).
//
//	go test ./internal/render -run '^$' -bench QueueDelivery -benchtime 5000x
func BenchmarkQueueDelivery(b *testing.B) {
	bin := testenv.WorkerdBinary(b)
	ref := render.DataRef{Kind: render.DataQueue, Name: "bench"}
	hundred, zero := int32(100), int32(0)
	h := render.DataHost{Kind: render.DataQueue, Namespace: "default", Name: "bench",
		Consumer: &render.QueueConsumer{MaxBatchSize: &hundred, MaxBatchTimeout: &zero}}
	host := startHost(b, bin, b.TempDir(), render.Input{Worker: dataWorker(b, "queuebench.js"), DataHost: &h}, withSidecar(b))
	pods := startDataWorkerWith(b, bin, dataWorker(b, "queuebench.js"), map[render.DataRef]string{ref: host.Addrs[podcontract.GatewaySocket]}, withSidecar(b))
	w := dataWorker(b, "queuebench.js")
	stores, _ := dataBindings(w, map[render.DataRef]string{ref: ""})
	single := startHost(b, bin, b.TempDir(), render.Input{Worker: w, DataHost: &h, DataStores: stores}, withSidecar(b))
	for _, mode := range []struct{ name, producer, consumer string }{
		{"pods", pods.Addrs[podcontract.HTTPSocket], host.Addrs[podcontract.HTTPSocket]},
		{"single-process", single.Addrs[podcontract.HTTPSocket], single.Addrs[podcontract.HTTPSocket]},
	} {
		for _, batch := range []string{"0", "1"} {
			name := map[string]string{"0": "send", "1": "sendBatch"}[batch] + "/" + mode.name
			b.Run(name, func(b *testing.B) { benchDelivery(b, "http://"+mode.producer, "http://"+mode.consumer, batch) })
		}
	}
}

// benchDelivery sends b.N messages through producer (/send, 1000 per request) and waits
// until consumer has acked them all.
func benchDelivery(b *testing.B, producer, consumer, batch string) {
	hc := &http.Client{}
	acked := func() int {
		resp, err := hc.Get(consumer + "/acked")
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		n, err := strconv.Atoi(string(body))
		if err != nil {
			b.Fatalf("%s/acked: %q", consumer, body)
		}
		return n
	}
	base := acked()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; sent += 1000 {
		resp, err := hc.Get(fmt.Sprintf("%s/send?n=%d&batch=%s", producer, min(1000, b.N-sent), batch))
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("send: %v %v", err, resp)
		}
		_ = resp.Body.Close()
	}
	sentIn := time.Since(start)
	deadline := time.Now().Add(5 * time.Minute)
	for acked() < base+b.N {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d messages acked after 5 minutes", acked()-base, b.N)
		}
		time.Sleep(time.Millisecond)
	}
	total := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/total.Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N)/sentIn.Seconds(), "send-msgs/s")
}
