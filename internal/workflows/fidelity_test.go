package workflows_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// startParallel creates a Parallel instance with n concurrent step.do calls (p0..pn-1,
// each slower than the last) and returns once every callback has started.
func startParallel(h *harness, id string, n int) {
	h.t.Helper()
	h.create("parallel", id, map[string]any{"n": n, "slowMs": 800, "staggerMs": 300})
	h.waitFor("every step to start", 30*time.Second, func() bool {
		for i := range n {
			if len(h.counter.times(fmt.Sprintf("%s:p%d", id, i))) == 0 {
				return false
			}
		}
		return true
	})
}

// parallelCommitted reports whether every step p0..pn-1 of the instance is committed
// with result 1 (its callback's first run).
func parallelCommitted(h *harness, id string, n int) bool {
	for i := range n {
		if s := h.step("parallel", id, "do", fmt.Sprintf("p%d", i), 1); s == nil || !s.Done || string(s.Result) != "1" {
			return false
		}
	}
	return true
}

// checkRanOnce fails t unless every callback p0..pn-1 ran exactly once and the step
// after them ran after times.
func checkRanOnce(t *testing.T, h *harness, id string, n, after int) {
	t.Helper()
	for i := range n {
		if c := len(h.counter.times(fmt.Sprintf("%s:p%d", id, i))); c != 1 {
			t.Errorf("step p%d ran %d times, want once", i, c)
		}
	}
	if c := len(h.counter.times(id + ":after")); c != after {
		t.Errorf("the step after the concurrent ones ran %d times, want %d", c, after)
	}
}

// checkParallelOutput fails t unless the instance completed with every result 1.
func checkParallelOutput(t *testing.T, h *harness, id string, n int) {
	t.Helper()
	in := h.waitStatus("parallel", id, api.StatusComplete, api.StatusErrored)
	var out struct {
		Got   []int
		After int
	}
	if err := json.Unmarshal(in.Output, &out); err != nil || len(out.Got) != n || out.After != 1 {
		t.Fatalf("output %s (status %s, error %+v)", in.Output, in.Status, in.Error)
	}
	for i, g := range out.Got {
		if g != 1 {
			t.Errorf("step p%d: result %d, want 1", i, g)
		}
	}
}

// pause() while several step.do calls are in flight at once: the instance pauses only
// after every one of them settled, each result is committed, and on resume no completed
// step runs again (each callback's side effect happens once).
func TestPauseWaitsForConcurrentSteps(t *testing.T) {
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "parallel"}, "Parallel", "PARALLEL"})
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			id := fmt.Sprintf("par%d", n)
			startParallel(h, id, n)
			if st := h.binding("PARALLEL", "pause", map[string]any{"id": id}, nil); st != 200 {
				t.Fatalf("pause: %d", st)
			}
			h.waitStatus("parallel", id, api.StatusPaused)
			if !parallelCommitted(h, id, n) {
				t.Errorf("paused before every step in flight was committed: %+v", h.steps("parallel", id))
			}
			checkRanOnce(t, h, id, n, 0)
			if st := h.binding("PARALLEL", "resume", map[string]any{"id": id}, nil); st != 200 {
				t.Fatalf("resume: %d", st)
			}
			checkParallelOutput(t, h, id, n)
			checkRanOnce(t, h, id, n, 1)
		})
	}
}

// terminate() while several step.do calls are in flight: the call answers at once, but
// the instance stays running until every attempt in flight has settled and its result
// is committed; only then is it terminated, and no step starts after the terminate.
func TestTerminateCommitsConcurrentSteps(t *testing.T) {
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "parallel"}, "Parallel", "PARALLEL"})
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			id := fmt.Sprintf("term%d", n)
			startParallel(h, id, n)
			if st := h.binding("PARALLEL", "terminate", map[string]any{"id": id}, nil); st != 200 {
				t.Fatalf("terminate: %d", st)
			}
			waitTerminatedAfterCommits(t, h, id, n)
			h.waitFor("the run to end", 30*time.Second, func() bool {
				var s api.Stats
				h.api("GET", "/workflows/parallel/stats", nil, &s)
				return s.Inflight == 0
			})
			checkRanOnce(t, h, id, n, 0)
			if in := h.get("parallel", id); in.Status != api.StatusTerminated {
				t.Fatalf("status after the steps settled = %s", in.Status)
			}
		})
	}
}

// waitTerminatedAfterCommits polls status() after a terminate until it is terminated:
// while some of the steps p0..pn-1 are not committed (their callbacks unfinished) it must
// be running, and once it is terminated every result must be committed. The steps are
// read after the status, so a terminated status proves they were committed before it.
func waitTerminatedAfterCommits(t *testing.T, h *harness, id string, n int) {
	t.Helper()
	sawRunning := false
	h.waitFor("the instance to be terminated", 30*time.Second, func() bool {
		var st struct{ Status string }
		h.binding("PARALLEL", "status", map[string]any{"id": id}, &st)
		done := parallelCommitted(h, id, n)
		switch {
		case st.Status == api.StatusTerminated:
			if !done {
				t.Fatalf("terminated before every step in flight was committed: %+v", h.steps("parallel", id))
			}
			return true
		case st.Status != api.StatusRunning:
			t.Fatalf("status %q while the terminate waits for the steps in flight, want running", st.Status)
		}
		sawRunning = sawRunning || !done
		return false
	})
	if !sawRunning {
		t.Errorf("never saw the instance running with a step in flight after terminate()")
	}
}

// A graceful shutdown of the sidecar (SIGTERM) while several step.do calls are in
// flight waits for them: each result is committed before the process exits, so after
// a restart no callback runs again.
func TestShutdownCommitsConcurrentSteps(t *testing.T) {
	const n, id = 5, "shut5"
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "parallel"}, "Parallel", "PARALLEL"})
	startParallel(h, id, n)
	h.mu.Lock()
	p := h.sidecar
	h.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the sidecar did not exit within 30 s of SIGTERM")
	}
	h.startSidecar()
	if !parallelCommitted(h, id, n) {
		t.Errorf("steps in flight at SIGTERM not all committed before exit: %+v", h.steps("parallel", id))
	}
	checkParallelOutput(t, h, id, n)
	checkRanOnce(t, h, id, n, 1)
}

// Step configs and names are checked as Cloudflare checks them, before the callback
// runs: an invalid one throws a WorkflowFatalError naming the problem into the run.
func TestStepConfigChecks(t *testing.T) {
	h := newHarness(t, 0.1, wfDef{api.WorkflowConfig{Name: "configs"}, "Configs", "CONFIGS"})
	long := strings.Repeat("w", 256)
	cases := []struct {
		id      string
		payload map[string]any
		want    string // "" = valid: the callback runs once
	}{
		{"timeout-zero", map[string]any{"config": map[string]any{"timeout": 0}}, "timeout"},
		{"timeout-zero-string", map[string]any{"config": map[string]any{"timeout": "0"}}, "timeout"},
		{"retries-no-delay", map[string]any{"config": map[string]any{"retries": map[string]any{"limit": 1}}}, "retries.delay"},
		{"retries-no-limit", map[string]any{"config": map[string]any{"retries": map[string]any{"delay": 50}}}, "retries.limit"},
		{"retries-unknown-key", map[string]any{"config": map[string]any{"retries": map[string]any{"limit": 5, "delay": "10 minutes", "i-like-trains": "yes"}}}, "retries.i-like-trains"},
		{"retries-bad-delay", map[string]any{"config": map[string]any{"retries": map[string]any{"limit": 3, "delay": "i like trains", "backoff": "constant"}}}, "retries.delay"},
		{"retries-bad-backoff", map[string]any{"config": map[string]any{"retries": map[string]any{"limit": 3, "delay": 10, "backoff": "random"}}}, "retries.backoff"},
		{"unknown-key", map[string]any{"config": map[string]any{"timeout": "5 minutes", "colour": "red"}}, "colour"},
		{"sensitive-all", map[string]any{"config": map[string]any{"timeout": "5 minutes", "sensitive": "all"}}, "sensitive"},
		{"name-control-char", map[string]any{"name": "a\x00b"}, "Step name"},
		{"name-257", map[string]any{"name": long + "w"}, "exceeds max length (256 chars)"},
		{"valid-256", map[string]any{"name": long}, ""},
		// Cloudflare counts a step name's length in UTF-16 code units (string.length) and
		// accepts the empty name: workers-sdk packages/workflows-shared/src/lib/validators.ts
		// (isValidStepName) and its tests/validators.test.ts.
		{"valid-e-129", map[string]any{"name": strings.Repeat("é", 129)}, ""},
		{"valid-empty-name", map[string]any{"name": ""}, ""},
		{"name-emoji-129", map[string]any{"name": strings.Repeat("😀", 129)}, "exceeds max length (256 chars)"},
		// A step's value must be serialisable, else the instance ends, errored with a
		// WorkflowFatalError "... not serialisable" that run() cannot catch, as the pinned
		// workerd's own engine does (TestMatchesBuiltInEngine):
		// https://developers.cloudflare.com/workflows/build/rules-of-workflows/#ensure-return-values-are-serializable
		{"returns-function", map[string]any{"returns": "function"}, "not serialisable"},
		{"returns-symbol", map[string]any{"returns": "symbol"}, "not serialisable"},
		{"valid-limit-0", map[string]any{"config": map[string]any{"retries": map[string]any{"limit": 0, "delay": 100000, "backoff": "exponential"}, "timeout": "15 minutes"}}, ""},
		{"valid-delay-0", map[string]any{"config": map[string]any{"retries": map[string]any{"limit": 5, "delay": 0, "backoff": "constant"}, "timeout": "2 minutes"}}, ""},
		{"valid-sensitive", map[string]any{"config": map[string]any{"retries": map[string]any{"limit": 3, "delay": 10, "backoff": "constant"}, "timeout": "2 minutes", "sensitive": "output"}}, ""},
		{"valid-delay-function", map[string]any{"config": map[string]any{"retries": map[string]any{"limit": 3, "backoff": "constant"}}, "delayFn": true}, ""},
	}
	for _, tc := range cases {
		if _, ok := tc.payload["name"]; !ok {
			tc.payload["name"] = "s"
		}
		h.create("configs", tc.id, tc.payload)
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			in := h.waitStatus("configs", tc.id, api.StatusComplete, api.StatusErrored)
			if _, returns := tc.payload["returns"]; returns {
				// the callback ran once; its value ends the instance without a retry
				ran := len(h.counter.times(tc.id + ":ran"))
				if in.Status != api.StatusErrored || in.Error == nil || in.Error.Name != "WorkflowFatalError" || !strings.Contains(in.Error.Message, tc.want) || ran != 1 {
					t.Fatalf("status %s, error %+v (callback ran %d times); want errored with a WorkflowFatalError naming %q after one run", in.Status, in.Error, ran, tc.want)
				}
				return
			}
			var out struct {
				Ok            int
				Name, Message string
			}
			if err := json.Unmarshal(in.Output, &out); err != nil {
				t.Fatalf("output %s (status %s, error %+v)", in.Output, in.Status, in.Error)
			}
			ran := len(h.counter.times(tc.id + ":ran"))
			if tc.want == "" {
				if out.Ok != 1 || ran != 1 {
					t.Fatalf("valid config: output %s, callback ran %d times; want it to run once", in.Output, ran)
				}
				return
			}
			// run() gets the WorkflowFatalError as the built-in engine delivers it over JS
			// RPC: an Error whose message starts with the name.
			if out.Name != "Error" || !strings.HasPrefix(out.Message, "WorkflowFatalError: ") || !strings.Contains(out.Message, tc.want) || ran != 0 {
				t.Fatalf("got %s: %q (callback ran %d times); want Error \"WorkflowFatalError: ...\" naming %q before the callback", out.Name, out.Message, ran, tc.want)
			}
		})
	}
}

// ctx.config, as the step.do callback sees it, is the step's config merged over the
// defaults with its values as given (a duration string stays a string), and no
// retries.delay when the delay is a function: Cloudflare's engine passes the config it
// resolved as {...defaults, ...config, retries: {...defaults.retries, ...config.retries}}
// (workers-sdk packages/workflows-shared/src/context.ts; the context's shape:
// https://developers.cloudflare.com/workflows/build/workers-api/).
func TestStepContextConfig(t *testing.T) {
	h := newHarness(t, 0.1, wfDef{api.WorkflowConfig{Name: "configs"}, "Configs", "CONFIGS"})
	cases := []struct {
		id      string
		payload map[string]any
		want    string
	}{
		{"as-given", map[string]any{"config": map[string]any{"timeout": "5 minutes", "retries": map[string]any{"limit": 1, "delay": "1 second"}}},
			`{"retries":{"backoff":"exponential","delay":"1 second","limit":1},"timeout":"5 minutes"}`},
		{"delay-function", map[string]any{"config": map[string]any{"timeout": 1000, "retries": map[string]any{"limit": 3, "backoff": "constant"}}, "delayFn": true},
			`{"retries":{"backoff":"constant","limit":3},"timeout":1000}`},
	}
	for _, tc := range cases {
		tc.payload["name"], tc.payload["returns"] = "s", "config"
		h.create("configs", tc.id, tc.payload)
	}
	for _, tc := range cases {
		in := h.waitStatus("configs", tc.id, api.StatusComplete, api.StatusErrored)
		var out struct{ Ok json.RawMessage }
		if err := json.Unmarshal(in.Output, &out); err != nil {
			t.Fatalf("%s: output %s: %v", tc.id, in.Output, err)
		}
		var got any
		_ = json.Unmarshal(out.Ok, &got)
		if b, _ := json.Marshal(got); string(b) != tc.want {
			t.Errorf("%s: ctx.config %s, want %s", tc.id, b, tc.want)
		}
	}
}

// retries.delay as a function: it is called after each failed attempt with the step
// context and the error, and its answers (ms or a duration string, then the backoff)
// are the delays recorded and waited; a throwing function fails the step for good.
func TestDelayFunction(t *testing.T) {
	const scale = 0.1
	h := newHarness(t, scale, wfDef{api.WorkflowConfig{Name: "delayfn"}, "DelayFn", "DELAYFN"})
	h.create("delayfn", "d1", map[string]any{})
	h.create("delayfn", "d2", map[string]any{"throwing": true})
	in := h.waitStatus("delayfn", "d1", api.StatusErrored, api.StatusComplete)
	if in.Error == nil || in.Error.Message != "boom 4" {
		t.Fatalf("d1: status %s, error %+v; want the 4th attempt's error", in.Status, in.Error)
	}
	s := h.step("delayfn", "d1", "do", "flaky", 1)
	if s == nil || len(s.Attempts) != 4 {
		t.Fatalf("d1 steps: %+v", s)
	}
	for i, want := range []int64{1000, 2000, 3000} {
		a, next := s.Attempts[i], s.Attempts[i+1]
		if a.RetryDelayMs == nil || *a.RetryDelayMs != want {
			t.Errorf("attempt %d: recorded delay %s, want %d", i+1, fmtMs(a.RetryDelayMs), want)
		}
		if waited := next.Start - a.End; waited < int64(float64(want)*scale)-5 {
			t.Errorf("attempt %d: next attempt started %d ms after, want at least %v ms", i+1, waited, float64(want)*scale)
		}
	}
	in = h.waitStatus("delayfn", "d2", api.StatusErrored, api.StatusComplete)
	if in.Error == nil || in.Error.Name != "Error" || in.Error.Message != `NonRetryableDelayError: The delay function for step "flaky-1" threw an error: no delay for you` {
		t.Fatalf("d2: status %s, error %+v", in.Status, in.Error)
	}
	if s := h.step("delayfn", "d2", "do", "flaky", 1); s == nil || len(s.Attempts) != 1 {
		t.Fatalf("d2 steps: %+v; want one attempt", s)
	}
}

// Shapes user code reads: createBatch([]) fails with Cloudflare's message; an errored
// instance's status() has output null; a waitForEvent timeout of 500 ms is accepted
// (it times out).
func TestBindingShapes(t *testing.T) {
	h := newHarness(t, 1,
		wfDef{api.WorkflowConfig{Name: "configs"}, "Configs", "CONFIGS"},
		wfDef{api.WorkflowConfig{Name: "shortwait"}, "ShortWait", "SHORTWAIT"})
	var out struct {
		Error struct{ Name, Message string }
	}
	if st := h.binding("CONFIGS", "createBatch", []any{}, &out); st != 400 || out.Error.Message != "WorkflowError: batchCreate should have at least 1 instance" {
		t.Errorf("createBatch([]): %d %+v", st, out.Error)
	}
	// An empty id is an invalid id, not a request for a generated one: workers-sdk's
	// isValidWorkflowInstanceId (packages/workflows-shared/src/lib/validators.ts) rejects "".
	out.Error.Name, out.Error.Message = "", ""
	if st := h.binding("CONFIGS", "create", map[string]any{"id": ""}, &out); st != 400 || !strings.Contains(out.Error.Message, "invalid id") {
		t.Errorf(`create({id: ""}): %d %+v; want the invalid id error`, st, out.Error)
	}
	h.create("configs", "errs", map[string]any{"name": "s", "config": map[string]any{"timeout": 0}, "rethrow": true})
	h.waitStatus("configs", "errs", api.StatusErrored, api.StatusComplete)
	var status map[string]any
	h.binding("CONFIGS", "status", map[string]any{"id": "errs"}, &status)
	if v, ok := status["output"]; !ok || v != nil || status["status"] != "errored" {
		t.Errorf("status() of an errored instance: %v; want output: null", status)
	}
	h.create("shortwait", "w1", map[string]any{})
	in := h.waitStatus("shortwait", "w1", api.StatusComplete, api.StatusErrored)
	if string(in.Output) != `"Error"` {
		t.Errorf("waitForEvent timeout 500 ms: status %s, output %s, error %+v", in.Status, in.Output, in.Error)
	}
}

func fmtMs(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// kill -9 of the sidecar while several step.do calls are in flight: a step whose result
// was acknowledged (committed) before the kill never runs again, and every committed
// result is its counter's final value.
func TestConcurrentStepsSurviveSidecarKill(t *testing.T) {
	const n = 5
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "parallel"}, "Parallel", "PARALLEL"})
	h.create("parallel", "k1", map[string]any{"n": n, "slowMs": 300, "staggerMs": 400})
	done := func(i int) bool {
		s := h.step("parallel", "k1", "do", fmt.Sprintf("p%d", i), 1)
		return s != nil && s.Done
	}
	h.waitFor("the first two steps to commit", 30*time.Second, func() bool { return done(0) && done(1) })
	var acked []int
	for i := range n {
		if done(i) {
			acked = append(acked, i)
		}
	}
	h.mu.Lock()
	h.sidecar.kill()
	h.mu.Unlock()
	h.startSidecar()
	in := h.waitStatus("parallel", "k1", api.StatusComplete, api.StatusErrored)
	var out struct{ Got []int }
	if err := json.Unmarshal(in.Output, &out); err != nil || len(out.Got) != n {
		t.Fatalf("output %s (status %s, error %+v)", in.Output, in.Status, in.Error)
	}
	for _, i := range acked {
		if c := len(h.counter.times(fmt.Sprintf("k1:p%d", i))); c != 1 {
			t.Errorf("step p%d, acknowledged before the kill, ran %d times", i, c)
		}
	}
	for i := range n {
		if c := len(h.counter.times(fmt.Sprintf("k1:p%d", i))); out.Got[i] != c {
			t.Errorf("step p%d: committed result %d, but its callback ran %d times", i, out.Got[i], c)
		}
	}
}
