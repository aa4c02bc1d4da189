package render_test

import (
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// BenchmarkDurableObjectCall measures one JS RPC call (stub.value(), a storage read)
// made by the Worker code of shard 0 through the router, to an object on shard 0
// (in-process) and to an object on shard 1 (across processes through shard 1's gateway
// over loopback). Each iteration is one HTTP request to shard 0's http socket, so both
// include the same HTTP overhead; the difference is the cross-shard hop.
// Metrics: p50-us and p99-us per call, calls/s (one client, sequential).
//
//	go test ./internal/render -run '^$' -bench DurableObjectCall -benchtime 2000x
func BenchmarkDurableObjectCall(b *testing.B) {
	c := startDOCluster(b, 0)
	for _, tc := range []struct {
		name  string
		shard int32
	}{{"local", 0}, {"cross-shard", 1}} {
		name, _ := nameOnShard(b, c, "bench-"+tc.name, tc.shard)
		q := url.Values{"name": {name}}
		c.mustGet(b, c.shards[0], "/inc", q)
		b.Run(tc.name, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if got := c.mustGet(b, c.shards[0], "/value", q); got != "1" {
					b.Fatalf("value %s", got)
				}
				durs = append(durs, time.Since(t0))
			}
			total := time.Since(start)
			b.StopTimer()
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-us")
			b.ReportMetric(float64(b.N)/total.Seconds(), "calls/s")
		})
	}
}

// BenchmarkDurableObjectWebSocket measures WebSocket echo through a hibernatable socket
// to an object on shard 1, reached two ways in the same run: "router+gateway" connects
// to a Worker replica (its router sends the upgrade to shard 1's gateway, which relays
// the socket) and "shard-direct" connects to shard 1's own http socket (its router calls
// the object in-process). Each iteration is one echo round trip (p50-us, p99-us); then
// msgs/s sends b.N messages back to back and reads the b.N echoes.
//
//	go test ./internal/render -run '^$' -bench DurableObjectWebSocket -benchtime 2000x
func BenchmarkDurableObjectWebSocket(b *testing.B) {
	w, d := fixture(b, "wsroom")
	c := startDOClusterFor(b, w, d, 1)
	room, _ := nameOnShard(b, c, "bench-ws", 1)
	for _, tc := range []struct {
		name string
		p    *proc
	}{{"router+gateway", c.replicas[0]}, {"shard-direct", c.shards[1]}} {
		ws := dialRoom(b, tc.p, room, "bench", "")
		testenv.RoundTrip(b, ws, "echo:warm")
		b.Run(tc.name, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if got := testenv.RoundTrip(b, ws, "echo:x"); got != "x" {
					b.Fatalf("echo %q", got)
				}
				durs = append(durs, time.Since(t0))
			}
			b.StopTimer()
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-us")
			b.ReportMetric(float64(b.N)/pipelined(b, ws, b.N).Seconds(), "msgs/s")
		})
	}
}

// pipelined sends n echo messages without waiting and returns the time until all n
// echoes arrived.
func pipelined(b *testing.B, ws *websocket.Conn, n int) time.Duration {
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := ws.WriteMessage(websocket.TextMessage, []byte("echo:p")); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := 0; i < n; i++ {
		_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
		if _, _, err := ws.ReadMessage(); err != nil {
			b.Fatalf("echo %d of %d: %v", i, n, err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkDurableObjectCallTLS is BenchmarkDurableObjectCall's cross-shard call with
// internal TLS: shard 0's router reaches shard 1's gateway over mutual TLS, terminated
// by the sidecar's relay in front of workerd's loopback socket (podcontract.
// FrontedSockets). Run against a tree where workerd terminated TLS itself for the A/B
// in docs/benchmarks.md.
//
//	go test ./internal/render -run '^$' -bench DurableObjectCallTLS -benchtime 2000x
func BenchmarkDurableObjectCallTLS(b *testing.B) {
	plane, err := internalca.NewPlane("default")
	if err != nil {
		b.Fatal(err)
	}
	w, d := doFixture(b)
	c := startDOClusterTLS(b, w, d, 0, plane.Namespaces["default"])
	name, _ := nameOnShard(b, c, "bench-tls", 1)
	q := url.Values{"name": {name}}
	c.mustGet(b, c.shards[0], "/inc", q)
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if got := c.mustGet(b, c.shards[0], "/value", q); got != "1" {
			b.Fatalf("value %s", got)
		}
		durs = append(durs, time.Since(t0))
	}
	total := time.Since(start)
	b.StopTimer()
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-us")
	b.ReportMetric(float64(b.N)/total.Seconds(), "calls/s")
}
