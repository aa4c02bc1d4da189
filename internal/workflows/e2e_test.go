package workflows_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Done-means 1: do -> sleep("2 seconds") -> waitForEvent -> do completes after sendEvent,
// with the right output in status() (through the env binding in Worker code).
func TestSleepWaitForEventComplete(t *testing.T) {
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "basic"}, "Basic", "BASIC"})
	var created struct{ ID string }
	if st := h.binding("BASIC", "create", map[string]any{"id": "order-1", "params": map[string]any{"n": 41}}, &created); st != 200 || created.ID != "order-1" {
		t.Fatalf("create through the binding: %d %+v", st, created)
	}
	// The sleep is recorded with its deadline, then the wait suspends the instance.
	in := h.waitStatus("basic", "order-1", api.StatusWaiting)
	h.waitFor("the waitForEvent step", 30*time.Second, func() bool {
		in = h.get("basic", "order-1")
		return in.WaitType == "approve"
	})
	nap := h.step("basic", "order-1", "sleep", "nap", 1)
	if nap == nil || !nap.Done {
		t.Fatalf("sleep step: %+v", nap)
	}
	var st map[string]any
	h.binding("BASIC", "status", map[string]any{"id": "order-1"}, &st)
	if st["status"] != api.StatusWaiting {
		t.Fatalf("status() before the event = %v, want waiting", st)
	}
	if code := h.binding("BASIC", "sendEvent", map[string]any{"id": "order-1", "type": "approve", "payload": map[string]any{"add": 100, "by": "ops"}}, nil); code != 200 {
		t.Fatalf("sendEvent: %d", code)
	}
	h.waitStatus("basic", "order-1", api.StatusComplete)
	h.binding("BASIC", "status", map[string]any{"id": "order-1"}, &st)
	want := map[string]any{"status": "complete", "output": map[string]any{
		"a": map[string]any{"n": 42.0}, "b": map[string]any{"total": 142.0}, "by": "ops"}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("status() = %v\nwant %v", st, want)
	}
	for _, s := range h.steps("basic", "order-1") {
		if s.Kind == "do" && len(s.Attempts) != 1 {
			t.Errorf("step %s ran %d times, want 1", s.Name, len(s.Attempts))
		}
	}
}

// Done-means 3 and 2: NonRetryableError("") stops at one attempt; retry arithmetic is
// read from the engine's recorded attempts (delays unscaled; the harness scales waits).
func TestRetries(t *testing.T) {
	h := newHarness(t, 0.05, wfDef{api.WorkflowConfig{Name: "retry"}, "Retry", "RETRY"})
	defLimit := int(limits.Get(limits.DefaultProfile, limits.WorkflowRetryLimit))
	defDelay := limits.Get(limits.DefaultProfile, limits.WorkflowRetryDelayMs)
	cases := []struct {
		name       string
		params     map[string]any
		wantStatus string
		attempts   int
		delays     []int64 // recorded retryDelayMs per failed attempt that was retried
		errName    string
	}{
		{"NonRetryableError with an empty message", map[string]any{"mode": "nonretryable", "config": map[string]any{"retries": map[string]any{"limit": 5, "delay": "1 second"}}},
			api.StatusErrored, 1, nil, "NonRetryableError"},
		{"exponential 1 second", map[string]any{"mode": "throw", "config": map[string]any{"retries": map[string]any{"limit": 5, "delay": "1 second", "backoff": "exponential"}}},
			api.StatusErrored, 6, []int64{1000, 2000, 4000, 8000, 16000}, "Error"},
		{"linear 1 second", map[string]any{"mode": "throw", "config": map[string]any{"retries": map[string]any{"limit": 5, "delay": "1 second", "backoff": "linear"}}},
			api.StatusErrored, 6, []int64{1000, 2000, 3000, 4000, 5000}, "Error"},
		{"limit 0", map[string]any{"mode": "throw", "config": map[string]any{"retries": map[string]any{"limit": 0, "delay": "1 second"}}},
			api.StatusErrored, 1, nil, "Error"},
		{"delay 0 retries at once", map[string]any{"mode": "throw", "config": map[string]any{"retries": map[string]any{"limit": 3, "delay": 0}}},
			api.StatusErrored, 4, []int64{0, 0, 0}, "Error"},
		{"default config (limit and delay from internal/limits)", map[string]any{"mode": "throw"},
			api.StatusErrored, defLimit + 1, expDelays(defDelay, defLimit), "Error"},
		{"timeout 2 seconds fails the slow attempt", map[string]any{"mode": "slow-first", "slowMs": 3000, "config": map[string]any{"timeout": "2 seconds", "retries": map[string]any{"limit": 2, "delay": 0}}},
			api.StatusComplete, 2, []int64{0}, "WorkflowTimeoutError"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "retry-" + string(rune('a'+i))
			h.create("retry", id, tc.params)
			in := h.waitStatus("retry", id, api.StatusErrored, api.StatusComplete)
			if in.Status != tc.wantStatus {
				t.Fatalf("status %s (error %+v), want %s", in.Status, in.Error, tc.wantStatus)
			}
			s := h.step("retry", id, "do", "flaky", 1)
			if s == nil || len(s.Attempts) != tc.attempts {
				t.Fatalf("attempts = %+v, want %d", s, tc.attempts)
			}
			var delays []int64
			for k, a := range s.Attempts {
				if a.N != k+1 {
					t.Errorf("attempt %d numbered %d", k+1, a.N)
				}
				if a.RetryDelayMs != nil {
					delays = append(delays, *a.RetryDelayMs)
					// The next attempt did not start before the (scaled) delay elapsed.
					if next := s.Attempts[k+1]; next.Start < a.End+int64(float64(*a.RetryDelayMs)*0.05) {
						t.Errorf("attempt %d started %d ms after attempt %d ended, before the scaled delay %d ms", next.N, next.Start-a.End, a.N, int64(float64(*a.RetryDelayMs)*0.05))
					}
				}
			}
			if !reflect.DeepEqual(delays, tc.delays) {
				t.Errorf("recorded retry delays %v, want %v", delays, tc.delays)
			}
			if e := s.Attempts[0].Error; e == nil || e.Name != tc.errName {
				t.Errorf("first attempt error %+v, want name %s", e, tc.errName)
			}
			if tc.wantStatus == api.StatusErrored && (in.Error == nil || in.Error.Name != tc.errName) {
				t.Errorf("instance error %+v, want name %s", in.Error, tc.errName)
			}
			if tc.errName == "NonRetryableError" && in.Error.Message != "" {
				t.Errorf("instance error message %q, want the empty message", in.Error.Message)
			}
		})
	}
}

func expDelays(d int64, n int) []int64 {
	var out []int64
	for i := 0; i < n; i++ {
		out = append(out, d<<i)
	}
	return out
}

var _ = json.Marshal

// TestEngineMetrics: the engine's series count what the Basic workflow did, as read on
// the sidecar's /metrics: two step.do attempts (first, second), one run suspended by the
// sleep and one by the wait, one complete run, and no run in flight or ready after it.
func TestEngineMetrics(t *testing.T) {
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "basic"}, "Basic", "BASIC"})
	h.create("basic", "m-1", map[string]any{"n": 1})
	h.waitFor("the waitForEvent step", 30*time.Second, func() bool { return h.get("basic", "m-1").WaitType == "approve" })
	if code := h.binding("BASIC", "sendEvent", map[string]any{"id": "m-1", "type": "approve", "payload": map[string]any{"add": 1}}, nil); code != 200 {
		t.Fatalf("sendEvent: %d", code)
	}
	h.waitStatus("basic", "m-1", api.StatusComplete)
	want := map[string]float64{
		`workerd_operator_workflow_step_attempts_total{workflow="basic"}`:            2,
		`workerd_operator_workflow_runs_total{outcome="suspended",workflow="basic"}`: 2,
		`workerd_operator_workflow_runs_total{outcome="complete",workflow="basic"}`:  1,
		`workerd_operator_workflow_runs_in_flight{workflow="basic"}`:                 0,
		`workerd_operator_workflow_runs_ready{workflow="basic"}`:                     0,
		`workerd_operator_workflow_commit_failures_total`:                            0,
	}
	var got map[string]float64
	h.waitFor("the run's end counted", 10*time.Second, func() bool {
		got = scrapeSeries(t, "http://"+h.sidecarAddr+"/metrics", "workerd_operator_workflow_")
		return got[`workerd_operator_workflow_runs_total{outcome="complete",workflow="basic"}`] == 1
	})
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

// scrapeSeries reads url's Prometheus text exposition: each sample of a series named
// with prefix, keyed by its line's name and labels (client_golang writes the labels
// sorted by name).
func scrapeSeries(t *testing.T, url, prefix string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if !strings.HasPrefix(line, prefix) || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%s: %q", url, line)
		}
		out[line[:i]] = v
	}
	return out
}
