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
	"github.com/workerd-operator/workerd-operator/internal/shim"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
)

const helloJS = `export default { fetch() { return new Response("hello") } }`

// BenchmarkTailWorker measures the hello Worker with the tail worker (the rendered
// config) and without it (the same config minus its streamingTails line), both
// processes running at once with their own sidecar, requests alternating between them
// in blocks of 50 so that both see the same machine (max(b.N, 2000) requests). Metrics
// per variant: req/s (one client, sequential) and p99-us; on/off-rps is the throughput
// ratio.
//
//	go test ./internal/render -run '^$' -bench TailWorker -benchtime 4000x
func BenchmarkTailWorker(b *testing.B) {
	hello := inlineWorker("hello", helloJS)
	on := startRendered(b, render.Input{Worker: hello}, startSidecar(b))
	compareOnOff(b, on, startWithoutTail(b, render.Input{Worker: hello}))
}

// compareOnOff sends max(b.N, 2000) GETs alternately to on and off (blocks of 50) and
// reports each one's req/s and p99 and the ratio on/off-rps.
func compareOnOff(b *testing.B, on, off *localrun.Local) int {
	b.Helper()
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
	return len(durs[0])
}

// startWithoutTail is startRendered with the user Worker's streamingTails removed.
func startWithoutTail(b *testing.B, in render.Input) *localrun.Local {
	b.Helper()
	out, err := render.Render(in)
	if err != nil {
		b.Fatal(err)
	}
	out.Files[0].Data = bytes.Replace(out.Files[0].Data, streamingTailsLine(b, out.Files[0].Data), nil, 1)
	return startFiles(b, out.Files, startSidecar(b))
}

func streamingTailsLine(b *testing.B, config []byte) []byte {
	b.Helper()
	line := []byte(`streamingTails = ["` + podcontract.TailService + `"],`)
	if !bytes.Contains(config, line) {
		b.Fatalf("config lacks %s", line)
	}
	return line
}

// Tail worker forms other than the product's, for BenchmarkTailWorkerForms.
const (
	// noopStreamingTail receives every event of every invocation and does nothing.
	noopStreamingTail = `export default { tailStream() { return () => {}; } };`
	// noopBufferedTail receives each invocation's TraceItem and does nothing.
	noopBufferedTail = `export default { tail() {} };`
	// bufferedTail sends what a buffered TraceItem holds as tail.js's records, batched
	// as tail.js does; it has no spans, no invocation or trace id and no wall time
	// (workerd reports wallTime 0 and only the event's start time).
	bufferedTail = `let queue = [], flushing = false;
async function flush(env) {
  try {
    while (queue.length > 0) {
      if (queue.length < 256) await new Promise((r) => setTimeout(r, 25));
      const batch = queue.splice(0, 256);
      try {
        const res = await env.SIDECAR.fetch("http://sidecar" + env.TAIL_PATH, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(batch) });
        await res.body?.cancel();
      } catch {}
    }
  } finally { flushing = false; }
}
export default {
  tail(events, env) {
    for (const e of events) queue.push({ worker: env.WORKER, entrypoint: e.entrypoint || "default", executionModel: e.executionModel || "",
      trigger: e.event && e.event.request ? "fetch" : "unknown", outcome: e.outcome, status: (e.event && e.event.response && e.event.response.status) || 0,
      start: e.eventTimestamp || 0, logs: (e.logs || []).map((l) => ({ at: l.timestamp, level: l.level, message: String(l.message) })),
      exceptions: (e.exceptions || []).map((x) => ({ at: x.timestamp, name: x.name, message: x.message, stack: "" })) });
    if (flushing) return;
    flushing = true;
    return flush(env);
  },
};`
)

// BenchmarkTailWorkerForms is BenchmarkTailWorker with other tail workers in the "on"
// process: what the form (workerd's streamingTails or buffered tails) and the tail
// worker's own work cost. Not the product's: each loses series the product has
// (docs/benchmarks.md, "Tail worker on vs off").
func BenchmarkTailWorkerForms(b *testing.B) {
	for _, f := range []struct {
		name, js string
		buffered bool
	}{
		{"streaming-noop", noopStreamingTail, false},
		{"buffered", bufferedTail, true},
		{"buffered-noop", noopBufferedTail, true},
	} {
		b.Run(f.name, func(b *testing.B) {
			hello := inlineWorker("hello", helloJS)
			out, err := render.Render(render.Input{Worker: hello})
			if err != nil {
				b.Fatal(err)
			}
			if f.buffered {
				cfg := out.Files[0].Data
				out.Files[0].Data = bytes.Replace(cfg, streamingTailsLine(b, cfg), []byte(`tails = ["`+podcontract.TailService+`"],`), 1)
			}
			replaced := false
			for i := range out.Files {
				if out.Files[i].Path == podcontract.ShimSubdir+"/"+shim.TailModule {
					out.Files[i].Data, replaced = []byte(f.js), true
				}
			}
			if !replaced {
				b.Fatalf("no file %s/%s", podcontract.ShimSubdir, shim.TailModule)
			}
			sc := startSidecar(b)
			n := compareOnOff(b, startFiles(b, out.Files, sc), startWithoutTail(b, render.Input{Worker: hello}))
			if f.js == bufferedTail {
				// The records reach the sidecar: the benchmark measures a working form.
				m := &metricsOf{t: b, addr: sc}
				if m.waitFor(telemetry.InvocationsTotal, float64(n)); m.sum(telemetry.InvocationsTotal) != float64(n) {
					b.Fatalf("sidecar counted %v invocations, want %d", m.sum(telemetry.InvocationsTotal), n)
				}
			}
		})
	}
}
