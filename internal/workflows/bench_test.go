package workflows_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// BenchmarkEngines runs the same workflow (WF_BENCH_INSTANCES instances x WF_BENCH_STEPS
// step.do each, default 100 x 10) on this engine (sidecar process + pinned workerd, fsync
// per commit) and on workerd's built-in engine (`workerd serve wrangler.json
// --experimental`, workerd-facts.md §3.2), created and polled through the same binding
// calls. Metrics: completed steps per second (first create to last completion) and the
// p99 latency between consecutive steps of an instance (from the steps' own timestamps).
//
//	go test ./internal/workflows/ -run '^$' -bench Engines -benchtime 1x
func BenchmarkEngines(b *testing.B) {
	n, m := envInt("WF_BENCH_INSTANCES", 100), envInt("WF_BENCH_STEPS", 10)
	b.Run("sidecar", func(b *testing.B) {
		h := newHarness(b, 1, wfDef{api.WorkflowConfig{Name: "bench"}, "Bench", "BENCH"})
		runBench(b, h, "http://"+h.httpAddr, n, m, func() func() { return h.profiling(b) })
	})
	b.Run("builtin", func(b *testing.B) {
		dir := b.TempDir()
		src, err := os.ReadFile("testdata/worker.js")
		if err != nil {
			b.Fatal(err)
		}
		cfg := `{"name": "bench", "main": "worker.js", "compatibility_date": "2026-09-10", "no_bundle": true,
 "workflows": [{"name": "bench", "binding": "BENCH", "class_name": "Bench"}]}`
		for name, data := range map[string][]byte{"worker.js": src, "wrangler.json": []byte(cfg)} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		addr := testenv.FreeLoopbackAddr(b)
		logs := &syncBuffer{}
		cmd := exec.Command(testenv.WorkerdBinary(b), "serve", "wrangler.json", "--experimental", "--socket-addr=http="+addr)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logs, logs
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		p := &proc{cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.exited) }()
		b.Cleanup(p.kill)
		h := &harness{t: b, logs: logs, client: newHarnessClient()}
		h.waitUp("workerd (built-in engine)", p, "http://"+addr+"/")
		runBench(b, h, "http://"+addr, n, m, func() func() {
			c := cpuSeconds(cmd.Process.Pid)
			return func() { b.Logf("CPU seconds in the run: workerd %.2f", cpuSeconds(cmd.Process.Pid)-c) }
		})
	})
}

// runBench runs b.N rounds of n instances x m steps; measure brackets each round (its
// result ends the round) and the machine's load average is logged around it.
func runBench(b *testing.B, h *harness, base string, n, m int, measure func() func()) {
	var rates, p99s []float64
	for it := 0; it < b.N; it++ {
		load := loadAvg()
		done := measure()
		ids := make([]string, n)
		start := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range ids {
			ids[i] = fmt.Sprintf("b%d-%d-%d", time.Now().UnixNano()%1e6, it, i)
			wg.Add(1)
			sem <- struct{}{}
			go func(id string) {
				defer wg.Done()
				defer func() { <-sem }()
				h.call(base+"/BENCH/create", "POST", map[string]any{"id": id, "params": map[string]any{"steps": m}}, nil)
			}(ids[i])
		}
		wg.Wait()
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
				h.call(base+"/BENCH/status", "POST", map[string]any{"id": id}, &st)
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
				time.Sleep(time.Duration(envInt("WF_BENCH_POLL_MS", 20)) * time.Millisecond)
			}
		}
		elapsed := time.Since(start)
		done()
		rates = append(rates, float64(n*m)/elapsed.Seconds())
		sort.Float64s(lat)
		if len(lat) > 0 {
			p99s = append(p99s, lat[int(float64(len(lat)-1)*0.99)])
			b.Logf("round %d: %.0f steps/s, p50 %.0f ms, p99 %.0f ms; load average %s -> %s", it+1,
				rates[len(rates)-1], lat[len(lat)/2], p99s[len(p99s)-1], load, loadAvg())
		}
	}
	b.ReportMetric(mean(rates), "steps/s")
	b.ReportMetric(mean(p99s), "p99-step-ms")
	b.ReportMetric(float64(n), "instances")
	b.ReportMetric(float64(m), "steps/instance")
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
