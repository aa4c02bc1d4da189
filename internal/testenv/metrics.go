package testenv

import (
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are the families of one /metrics scrape (Prometheus text format).
type Metrics map[string]*dto.MetricFamily

// ParseMetrics reads a /metrics answer.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// Sum adds the values of name's series (a counter's value, a histogram's sample count)
// whose labels include every "label=value" of want ("label=" matches an empty value).
func (m Metrics) Sum(name string, want ...string) float64 {
	total := 0.0
	for _, s := range m.series(name, want) {
		switch {
		case s.Counter != nil:
			total += s.Counter.GetValue()
		case s.Histogram != nil:
			total += float64(s.Histogram.GetSampleCount())
		case s.Gauge != nil:
			total += s.Gauge.GetValue()
		}
	}
	return total
}

// AtMost adds, over the histogram name's series matching want (as Sum), the
// observations of at most le: the count of the bucket whose upper bound is le. le must
// be one of the histogram's bounds; -1 when a matching series lacks that bucket.
func (m Metrics) AtMost(name string, le float64, want ...string) float64 {
	total := 0.0
	for _, s := range m.series(name, want) {
		found := false
		for _, b := range s.GetHistogram().GetBucket() {
			if b.GetUpperBound() == le {
				total += float64(b.GetCumulativeCount())
				found = true
			}
		}
		if !found {
			return -1
		}
	}
	return total
}

// series are name's series whose labels include every "label=value" of want.
func (m Metrics) series(name string, want []string) []*dto.Metric {
	f := m[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, s := range f.Metric {
		have := map[string]string{}
		for _, l := range s.Label {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			ok = ok && have[k] == v
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// Expect is how many GETs of a path to send and the status each must answer.
type Expect struct{ N, Status int }

// GetAll sends the GETs of mix (by path) to base with hc and fails t on an error or on
// another status.
func GetAll(t testing.TB, hc *http.Client, base string, mix map[string]Expect) {
	t.Helper()
	for path, c := range mix {
		for range c.N {
			res, err := hc.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != c.Status {
				t.Fatalf("GET %s: %d, want %d", path, res.StatusCode, c.Status)
			}
		}
	}
}
