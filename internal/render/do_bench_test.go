package render_test

import (
	"net/url"
	"sort"
	"testing"
	"time"
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
