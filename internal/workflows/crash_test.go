package workflows_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Done-means 7: instances of a many-step workflow whose steps increment per-step counters
// in an external store; the sidecar and workerd are each kill -9ed at random moments
// during the run; every instance completes and no step's side effect ran after its
// result was acknowledged (committed): every increment of a step's counter arrived no
// later than the step's commit, and the committed result is the counter's final value.
// Figures (defaults; WF_CRASH_INSTANCES, WF_CRASH_STEPS, WF_CRASH_KILLS override): 200
// instances x 20 steps, at least 20 kills of each process (100 instances more at a time
// if the run ends first).
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: long")
	}
	nInst, nSteps, minKills := envInt("WF_CRASH_INSTANCES", 200), envInt("WF_CRASH_STEPS", 20), envInt("WF_CRASH_KILLS", 20)
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "counted"}, "Counted", "COUNTED"})
	create := func(from, to int) {
		for b := from; b < to; b += 100 {
			var batch []map[string]any
			for i := b; i < min(b+100, to); i++ {
				batch = append(batch, map[string]any{"id": fmt.Sprintf("i%03d", i), "params": map[string]any{"steps": nSteps}})
			}
			var res struct{ Created []any }
			if st := h.api("POST", "/workflows/counted/batch", map[string]any{"instances": batch}, &res); st != 200 || len(res.Created) != len(batch) {
				t.Fatalf("createBatch: %d", st)
			}
		}
	}
	create(0, nInst)
	completed := func() int {
		var s api.Stats
		if h.api("GET", "/workflows/counted/stats", nil, &s) != 200 {
			return -1
		}
		return s.Counts[api.StatusComplete]
	}
	// Kill at random moments while instances are still running; the run is slowed by the
	// kills themselves, so it stays in progress until both counts are reached. The process
	// with fewer kills so far goes next (a coin decides a tie), so neither count lags.
	kills := map[string]int{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 6))
	start := time.Now()
	for kills["sidecar"] < minKills || kills["workerd"] < minKills {
		time.Sleep(time.Duration(10+rng.IntN(90)) * time.Millisecond)
		if completed() == nInst {
			// Done before both counts were reached (a fast machine): 100 more instances
			// keep the run going; every instance is checked below.
			create(nInst, nInst+100)
			nInst += 100
			continue
		}
		h.mu.Lock()
		if d := kills["sidecar"] - kills["workerd"]; d < 0 || d == 0 && rng.IntN(2) == 0 {
			h.sidecar.kill()
			h.mu.Unlock()
			kills["sidecar"]++
			h.startSidecar()
		} else {
			h.workerd.kill()
			h.mu.Unlock()
			kills["workerd"]++
			h.startWorkerd()
		}
	}
	h.waitFor("every instance to complete", 10*time.Minute, func() bool { return completed() == nInst })
	elapsed := time.Since(start)
	reruns := 0
	for i := 0; i < nInst; i++ {
		id := fmt.Sprintf("i%03d", i)
		in := h.get("counted", id)
		var out []int
		if err := json.Unmarshal(in.Output, &out); err != nil || len(out) != nSteps {
			t.Fatalf("%s: output %s", id, in.Output)
		}
		for _, s := range h.steps("counted", id) {
			var k int
			fmt.Sscanf(s.Name, "s%d", &k)
			hits := h.counter.times(fmt.Sprintf("%s:s%d", id, k))
			var res int
			_ = json.Unmarshal(s.Result, &res)
			if !s.Done || res != len(hits) || out[k] != res {
				t.Errorf("%s step %s: committed result %d (output %d), counter %d", id, s.Name, res, out[k], len(hits))
			}
			for _, at := range hits {
				if at > s.CommittedAt {
					t.Errorf("%s step %s: side effect at %d after the step was acknowledged at %d", id, s.Name, at, s.CommittedAt)
				}
			}
			reruns += len(hits) - 1
		}
	}
	t.Logf("%d instances x %d steps completed in %v with kills %v; %d unacknowledged step attempts re-ran (allowed), 0 acknowledged steps re-ran",
		nInst, nSteps, elapsed.Round(time.Millisecond), kills, reruns)
}
