package workflows

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

func TestResolveConfigAndDelays(t *testing.T) {
	e := &Engine{o: Options{Profile: limits.DefaultProfile, Table: limits.Default()}}
	wf := &api.WorkflowConfig{Name: "w"}
	def, err := e.resolveConfig(wf, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if def.Retries.Limit != int(limits.Get(limits.DefaultProfile, limits.WorkflowRetryLimit)) ||
		def.Retries.DelayMs != limits.Get(limits.DefaultProfile, limits.WorkflowRetryDelayMs) ||
		def.Retries.Backoff != "exponential" || def.TimeoutMs != limits.Get(limits.DefaultProfile, limits.WorkflowStepTimeoutMs) {
		t.Fatalf("default config %+v", def)
	}
	cases := []struct {
		cfg    string
		delays []int64 // DelayMs(1..)
		err    string
	}{
		{`{"retries":{"limit":5,"delay":"1 second","backoff":"exponential"}}`, []int64{1000, 2000, 4000, 8000, 16000}, ""},
		{`{"retries":{"limit":5,"delay":"1 second","backoff":"linear"}}`, []int64{1000, 2000, 3000, 4000, 5000}, ""},
		{`{"retries":{"limit":5,"delay":"1 second","backoff":"constant"}}`, []int64{1000, 1000, 1000}, ""},
		{`{"retries":{"delay":500}}`, []int64{500, 1000, 2000}, ""}, // backoff keeps the default (exponential)
		{`{"retries":{"limit":10001}}`, nil, "workflow_retries_per_step"},
		{`{"retries":{"backoff":"random"}}`, nil, `retries.backoff "random"`},
		{`{"timeout":"forever"}`, nil, "timeout:"},
	}
	for _, tc := range cases {
		c, err := e.resolveConfig(wf, "s", json.RawMessage(tc.cfg))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `Step config for "s" is in a invalid format`) {
				t.Errorf("%s: error %v, want %q", tc.cfg, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.cfg, err)
			continue
		}
		for i, want := range tc.delays {
			if got := c.DelayMs(i + 1); got != want {
				t.Errorf("%s: DelayMs(%d) = %d, want %d", tc.cfg, i+1, got, want)
			}
		}
	}
}

func TestCheckName(t *testing.T) {
	e := &Engine{o: Options{Profile: limits.DefaultProfile, Table: limits.Default()}}
	max := int(limits.Get(limits.DefaultProfile, limits.WorkflowInstanceIDChars))
	cases := []struct {
		id string
		ok bool
	}{
		{"order-1", true}, {"_x", true}, {strings.Repeat("a", max), true},
		{strings.Repeat("a", max+1), false}, {"-x", false}, {"a.b", false}, {"", false}, {"a b", false},
	}
	for _, tc := range cases {
		err := e.checkName("id", tc.id, limits.WorkflowInstanceIDChars)
		if (err == nil) != tc.ok {
			t.Errorf("checkName(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "workflow_instance_id_chars") {
			t.Errorf("checkName(%q) error %v does not name the limit", tc.id, err)
		}
	}
}

// Retention: finished instances past spec.retention are deleted; others stay.
func TestRetentionSweep(t *testing.T) {
	e, err := New(Options{DataDir: t.TempDir(), RunnerURL: "http://127.0.0.1:9", Workflows: []api.WorkflowConfig{
		{Name: "short", SuccessRetentionMs: 1, ErrorRetentionMs: 1}, {Name: "long"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, wf := range []string{"short", "long"} {
		for _, id := range []string{"done", "queued"} {
			if _, err := e.Create(wf, api.CreateOptions{ID: id}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Terminate(wf, "done"); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	for n == 0 { // the 1 ms retention passes
		if n, err = e.SweepRetention(); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	cases := []struct {
		wf, id string
		kept   bool
	}{{"short", "done", false}, {"short", "queued", true}, {"long", "done", true}, {"long", "queued", true}}
	for _, tc := range cases {
		_, err := e.Get(tc.wf, tc.id)
		if (err == nil) != tc.kept {
			t.Errorf("%s/%s: kept=%v, want %v", tc.wf, tc.id, err == nil, tc.kept)
		}
	}
}

// terminate() of an instance with no step.do attempt in flight takes effect at once.
func TestTerminateWithNothingInFlight(t *testing.T) {
	e, err := New(Options{DataDir: t.TempDir(), RunnerURL: "http://127.0.0.1:9", Workflows: []api.WorkflowConfig{{Name: "wf"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Create("wf", api.CreateOptions{ID: "q"}); err != nil {
		t.Fatal(err)
	}
	in, err := e.Terminate("wf", "q")
	if err != nil || in.Status != api.StatusTerminated || in.TerminateRequested != 0 || in.Ended == 0 {
		t.Fatalf("terminate: %+v, %v; want terminated at once", in, err)
	}
}
