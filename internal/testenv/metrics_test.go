package testenv

import (
	"strings"
	"testing"
)

const scrape = `# TYPE t histogram
t_bucket{e="a",le="0.1"} 1
t_bucket{e="a",le="0.25"} 1
t_bucket{e="a",le="+Inf"} 3
t_sum{e="a"} 1.2
t_count{e="a"} 3
t_bucket{e="b",le="0.1"} 2
t_bucket{e="b",le="0.25"} 4
t_bucket{e="b",le="+Inf"} 4
t_sum{e="b"} 0.5
t_count{e="b"} 4
`

func TestMetricsHistogram(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(scrape))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		got, want float64
	}{
		{m.Sum("t"), 7},
		{m.Sum("t", "e=a"), 3},
		{m.AtMost("t", 0.25), 5},
		{m.AtMost("t", 0.25, "e=a"), 1},
		{m.AtMost("t", 0.1, "e=b"), 2},
		{m.AtMost("t", 0.5, "e=b"), -1},
		{m.AtMost("nope", 0.1), 0},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
}
