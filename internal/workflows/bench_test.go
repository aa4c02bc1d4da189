package workflows_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// BenchmarkEngines runs the same workflow (WF_BENCH_INSTANCES instances x WF_BENCH_STEPS
// step.do each, default 100 x 10) on this engine (sidecar process + pinned workerd, fsync
// per commit) and on workerd's built-in engine (`workerd serve wrangler.json
// --experimental`, workerd-facts.md §3.2), created and polled through the same binding
// calls. Both engines are up for the whole benchmark and each iteration runs one round
// on each, the order alternating, so both see the same machine load. Metrics per
// engine: completed steps per second (first create to last completion) and the p50 and
// p99 latency between consecutive steps of an instance (from the steps' own timestamps).
// WF_BENCH_PROFILE=<dir> records the sidecar's profiles (profile_test.go).
//
//	go test ./internal/workflows/ -run '^$' -bench Engines -benchtime 1x -count 3
func BenchmarkEngines(b *testing.B) {
	n, m := envInt("WF_BENCH_INSTANCES", 100), envInt("WF_BENCH_STEPS", 10)
	h := newHarness(b, 1, wfDef{api.WorkflowConfig{Name: "bench", Concurrency: envInt("WF_BENCH_CONCURRENCY", 0)}, "Bench", "BENCH"})
	side := benchEngine{name: "sidecar", h: h, base: "http://" + h.httpAddr, measure: func() func() { return h.profiling(b) }}
	built := startBuiltin(b)
	engines := []*benchEngine{&side, built}
	for it := 0; it < b.N; it++ {
		benchRounds++
		first := benchRounds % 2 // alternate which engine goes first
		for k := range engines {
			e := engines[(first+k)%2]
			r := e.round(b, fmt.Sprintf("%s-%d-%d", e.name, benchRounds, time.Now().UnixNano()%1e6), n, m)
			e.rounds = append(e.rounds, r)
		}
	}
	for _, e := range engines {
		var rates, p50s, p99s []float64
		for _, r := range e.rounds {
			rates, p50s, p99s = append(rates, r.rate), append(p50s, r.p50), append(p99s, r.p99)
		}
		b.ReportMetric(mean(rates), e.name+"-steps/s")
		b.ReportMetric(mean(p50s), e.name+"-p50-ms")
		b.ReportMetric(mean(p99s), e.name+"-p99-ms")
	}
}

// benchRounds counts the rounds of this process (the engines alternate going first).
var benchRounds int

type benchEngine struct {
	name    string
	h       *harness
	base    string
	measure func() func() // brackets a round; its result ends it
	rounds  []benchRound
}

type benchRound struct{ rate, p50, p99 float64 }

// startBuiltin starts workerd with its own engine on testdata/worker.js, workflow
// "bench" (class Bench) bound as BENCH.
func startBuiltin(b *testing.B) *benchEngine {
	h, cmd := startBuiltinEngine(b, wfDef{api.WorkflowConfig{Name: "bench"}, "Bench", "BENCH"})
	return &benchEngine{name: "builtin", h: h, base: "http://" + h.httpAddr, measure: func() func() {
		c := cpuSeconds(cmd.Process.Pid)
		return func() { b.Logf("CPU seconds in the run: workerd %.2f", cpuSeconds(cmd.Process.Pid)-c) }
	}}
}

// round creates n instances of m steps (16 creates in flight), polls them until they
// complete and measures the round; the machine's load average is logged around it.
func (e *benchEngine) round(b *testing.B, prefix string, n, m int) benchRound {
	load := loadAvg()
	done := e.measure()
	ids := make([]string, n)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		wg.Add(1)
		sem <- struct{}{}
		go func(id string) {
			defer wg.Done()
			defer func() { <-sem }()
			e.h.call(e.base+"/BENCH/create", "POST", map[string]any{"id": id, "params": map[string]any{"steps": m}}, nil)
		}(ids[i])
	}
	wg.Wait()
	lat := e.poll(b, ids)
	elapsed := time.Since(start)
	done()
	sort.Float64s(lat)
	r := benchRound{rate: float64(n*m) / elapsed.Seconds()}
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[int(float64(len(lat)-1)*0.99)]
	}
	b.Logf("%s round %d: %.0f steps/s, p50 %.0f ms, p99 %.0f ms; load average %s -> %s",
		e.name, len(e.rounds)+1, r.rate, r.p50, r.p99, load, loadAvg())
	return r
}

// poll asks each instance's status() until all are complete and returns the times
// between their consecutive steps (ms).
func (e *benchEngine) poll(b *testing.B, ids []string) []float64 {
	var lat []float64
	pending := append([]string(nil), ids...)
	deadline := time.Now().Add(10 * time.Minute)
	for len(pending) > 0 {
		var next []string
		for _, id := range pending {
			var st struct {
				Status string
				Output json.RawMessage
			}
			e.h.call(e.base+"/BENCH/status", "POST", map[string]any{"id": id}, &st)
			switch st.Status {
			case "complete":
				var ts []float64
				_ = json.Unmarshal(st.Output, &ts)
				for k := 1; k < len(ts); k++ {
					lat = append(lat, ts[k]-ts[k-1])
				}
			case "errored", "terminated":
				b.Fatalf("%s: %s", id, st.Status)
			default:
				next = append(next, id)
			}
		}
		pending = next
		if time.Now().After(deadline) {
			b.Fatalf("%d instances did not complete", len(pending))
		}
		if len(pending) > 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return lat
}

// loadAvg is the 1, 5 and 15-minute load averages (/proc/loadavg).
func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
