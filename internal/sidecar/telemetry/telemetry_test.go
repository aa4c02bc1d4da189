package telemetry_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
)

// A label the Worker's code chooses (here RPC method names) takes at most the bound's
// distinct values; later ones are counted as _other and in the overflow counter.
func TestLabelBound(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	h := telemetry.Handler(telemetry.Options{Metrics: telemetry.NewMetrics(reg, 2), Logs: &logs})
	body := `[
	  {"worker":"w","entrypoint":"Api","trigger":"rpc","method":"a","outcome":"ok"},
	  {"worker":"w","entrypoint":"Api","trigger":"rpc","method":"b","outcome":"ok"},
	  {"worker":"w","entrypoint":"Api","trigger":"rpc","method":"c","outcome":"ok"},
	  {"worker":"w","entrypoint":"Api","trigger":"rpc","method":"d","outcome":"ok","logs":[{"at":0,"level":"info","message":"hi"}]}
	]`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	want := `
# HELP workerd_operator_worker_label_overflow_total Events whose label value was replaced by _other because the label reached its distinct-value bound.
# TYPE workerd_operator_worker_label_overflow_total counter
workerd_operator_worker_label_overflow_total{label="method"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), telemetry.LabelOverflowTotal); err != nil {
		t.Error(err)
	}
	for method, n := range map[string]float64{"a": 1, "b": 1, telemetry.Other: 2} {
		if got := testutil.ToFloat64(counter(t, reg, method)); got != n {
			t.Errorf("method %s: %v invocations, want %v", method, got, n)
		}
	}
	if got := logs.String(); got != `{"time":"1970-01-01T00:00:00.000Z","type":"log","level":"info","worker":"w","entrypoint":"Api","trigger":"rpc","method":"d","requestId":"","message":"hi"}`+"\n" {
		t.Errorf("log line %s", got)
	}
}

// counter is the invocations series of RPC method m (worker w, entrypoint Api).
func counter(t *testing.T, reg *prometheus.Registry, m string) prometheus.Collector {
	t.Helper()
	return sumOf(t, reg, telemetry.InvocationsTotal, func(s *dto.Metric) bool {
		for _, l := range s.Label {
			if l.GetName() == "method" && l.GetValue() == m {
				return true
			}
		}
		return false
	})
}

// sumOf adds up the series of the counter family name that match keeps.
func sumOf(t *testing.T, reg *prometheus.Registry, name string, keep func(*dto.Metric) bool) prometheus.Collector {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.Metric {
			if keep(s) {
				c.Add(s.Counter.GetValue())
			}
		}
	}
	return c
}

func TestMalformed(t *testing.T) {
	h := telemetry.Handler(telemetry.Options{})
	for _, body := range []string{"{", `{"worker":"w"}`} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "want a JSON array") {
			t.Errorf("%s: %d %s", body, rec.Code, rec.Body)
		}
	}
}

// TestLargeBatch: tail.js (internal/shim) sends up to 256 records per POST and about
// 12 MiB of JSON plus one record (each with up to 256 log lines of 16 Ki characters):
// a batch up to MaxBatchBytes is counted and logged record by record, none dropped; one
// past it, or past MaxBatchRecords, is refused with 413 (a per-request bound, so one
// request cannot keep the sidecar decoding for minutes).
func TestLargeBatch(t *testing.T) {
	const lines = 256
	line := strings.Repeat("x", 12<<10)
	for _, tc := range []struct {
		records, lines int
		want           int
	}{
		{records: 20, lines: lines, want: http.StatusNoContent},                    // ~60 MiB
		{records: 24, lines: lines, want: http.StatusRequestEntityTooLarge},        // ~72 MiB
		{records: telemetry.MaxBatchRecords, lines: 0, want: http.StatusNoContent}, // 256 small records
		{records: telemetry.MaxBatchRecords + 1, lines: 0, want: http.StatusRequestEntityTooLarge},
	} {
		t.Run(fmt.Sprintf("%d records of %d lines", tc.records, tc.lines), func(t *testing.T) {
			largeBatch(t, tc.records, tc.lines, line, tc.want)
		})
	}
}

func largeBatch(t *testing.T, records, lines int, line string, want int) {
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, "[")
		for i := range records {
			if i > 0 {
				_, _ = io.WriteString(pw, ",")
			}
			_, _ = fmt.Fprintf(pw, `{"worker":"w","entrypoint":"default","trigger":"fetch","outcome":"ok","status":200,"logs":[`)
			for j := range lines {
				if j > 0 {
					_, _ = io.WriteString(pw, ",")
				}
				_, _ = fmt.Fprintf(pw, `{"at":0,"level":"log","message":"%s"}`, line)
			}
			_, _ = io.WriteString(pw, "]}")
		}
		_, _ = io.WriteString(pw, "]")
		pw.Close()
	}()
	reg := prometheus.NewRegistry()
	h := telemetry.Handler(telemetry.Options{Metrics: telemetry.NewMetrics(reg, 16), Logs: io.Discard})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", pr))
	_, _ = io.Copy(io.Discard, pr)
	if rec.Code != want {
		t.Fatalf("a batch of %d records of %d log lines (~%d MiB): %d %s, want %d", records, lines, records*lines*len(line)>>20, rec.Code, rec.Body, want)
	}
	if want != http.StatusNoContent {
		return
	}
	if n, err := testutil.GatherAndCount(reg, telemetry.InvocationsTotal); err != nil || n != 1 {
		t.Fatalf("invocation series: %d, %v", n, err)
	}
	if got := testutil.ToFloat64(counter(t, reg, "")); got != float64(records) {
		t.Errorf("%v invocations counted, want %d", got, records)
	}
}

// A partial record (the logs of an invocation still running past its response) is
// written as log lines and counted as logs, never as an invocation; its final record
// counts the invocation once.
func TestPartialRecord(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	var sunk int
	h := telemetry.Handler(telemetry.Options{Metrics: telemetry.NewMetrics(reg, 8), Logs: &logs, Sinks: []func(*telemetry.Record){func(*telemetry.Record) { sunk++ }}})
	for _, body := range []string{
		`[{"worker":"w","entrypoint":"Room","trigger":"fetch","invocationId":"i1","partial":true,"logs":[{"at":0,"level":"log","message":"later"}]}]`,
		`[{"worker":"w","entrypoint":"Room","trigger":"fetch","invocationId":"i1","outcome":"ok","status":101,"logs":[]}]`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	if got := testutil.ToFloat64(sumOf(t, reg, telemetry.InvocationsTotal, all)); got != 1 {
		t.Errorf("%v invocations, want 1", got)
	}
	if got := testutil.ToFloat64(sumOf(t, reg, telemetry.LogsTotal, all)); got != 1 {
		t.Errorf("%v logs, want 1", got)
	}
	if sunk != 1 {
		t.Errorf("the sinks (spans) got %d records, want the final one", sunk)
	}
	if !strings.Contains(logs.String(), `"requestId":"i1","message":"later"`) {
		t.Errorf("log lines %q", logs.String())
	}
}

func all(*dto.Metric) bool { return true }

// Each version of a gradual deployment has its own invocation series: the record's
// version becomes the version label (docs/versions.md).
func TestVersionLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := telemetry.Handler(telemetry.Options{Metrics: telemetry.NewMetrics(reg, 0), Logs: io.Discard})
	body := `[
	  {"worker":"w","version":"0123456789abcdef","entrypoint":"default","trigger":"fetch","outcome":"ok","status":200},
	  {"worker":"w","version":"0123456789abcdef","entrypoint":"default","trigger":"fetch","outcome":"exception"},
	  {"worker":"w","version":"fedcba9876543210","entrypoint":"default","trigger":"fetch","outcome":"ok","status":200}
	]`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	for _, c := range []struct {
		version, outcome string
		want             float64
	}{{"0123456789abcdef", "ok", 1}, {"0123456789abcdef", "exception", 1}, {"fedcba9876543210", "ok", 1}, {"fedcba9876543210", "exception", 0}} {
		got := testutil.ToFloat64(sumOf(t, reg, telemetry.InvocationsTotal, func(s *dto.Metric) bool {
			labels := map[string]string{}
			for _, l := range s.Label {
				labels[l.GetName()] = l.GetValue()
			}
			return labels["version"] == c.version && labels["outcome"] == c.outcome
		}))
		if got != c.want {
			t.Errorf("version %s outcome %s: %v invocations, want %v", c.version, c.outcome, got, c.want)
		}
	}
}
