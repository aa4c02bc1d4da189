package render_test

import (
	"bytes"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// BenchmarkTailWorker measures the hello Worker with the tail worker (the rendered
// config) and without it (the same config minus its streamingTails line), both
// processes running at once with their own sidecar, requests alternating between them
// in blocks of 50 so that both see the same machine (max(b.N, 2000) requests). Metrics
// per variant: req/s (one client, sequential) and p99-us; on/off-rps is the throughput
// ratio.
//
//	go test ./internal/render -run '^$' -bench TailWorker -benchtime 4000x
func BenchmarkTailWorker(b *testing.B) {
	hello := inlineWorker("hello", `export default { fetch() { return new Response("hello") } }`)
	on := startRendered(b, render.Input{Worker: hello}, startSidecar(b))
	off := startWithoutTail(b, render.Input{Worker: hello})
	urls := []string{"http://" + on.Addrs[podcontract.HTTPSocket] + "/", "http://" + off.Addrs[podcontract.HTTPSocket] + "/"}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	durs := [2][]time.Duration{}
	spent := [2]time.Duration{}
	// make bench runs -benchtime 1x: at least 2,000 requests, whatever b.N.
	n := max(b.N, 2000)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		v := (i / 50) % 2
		t0 := time.Now()
		res, err := hc.Get(urls[v])
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		d := time.Since(t0)
		durs[v] = append(durs[v], d)
		spent[v] += d
	}
	b.StopTimer()
	rps := [2]float64{}
	for v, name := range []string{"on", "off"} {
		ds := durs[v]
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		rps[v] = float64(len(ds)) / spent[v].Seconds()
		b.ReportMetric(rps[v], name+"-req/s")
		b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), name+"-p99-us")
	}
	b.ReportMetric(rps[0]/rps[1], "on/off-rps")
}

// startWithoutTail is startRendered with the user Worker's streamingTails removed.
func startWithoutTail(b *testing.B, in render.Input) *localrun.Local {
	b.Helper()
	out, err := render.Render(in)
	if err != nil {
		b.Fatal(err)
	}
	line := []byte(`streamingTails = ["` + podcontract.TailService + `"],`)
	if !bytes.Contains(out.Files[0].Data, line) {
		b.Fatalf("config lacks %s", line)
	}
	out.Files[0].Data = bytes.Replace(out.Files[0].Data, line, nil, 1)
	return startFiles(b, out.Files, startSidecar(b))
}
