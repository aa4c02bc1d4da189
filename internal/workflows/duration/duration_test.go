package duration

import (
	"encoding/json"
	"strings"
	"testing"
)

// The cases of admission's and the engine's former parsers, on the one grammar.
func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false}, {"250", 250, false}, {"1 second", 1000, false}, {"10 seconds", 10000, false},
		{"10 minutes", 600000, false}, {"2 hours", 7200000, false}, {"365 days", 365 * 86400000, false},
		{"1 week", 7 * 86400000, false}, {"1 month", 30 * 86400000, false}, {"1 year", 365 * 86400000, false},
		{"1 fortnight", 0, true}, {"-1", 0, true}, {"1  second", 0, true}, {"99999999999999999999", 0, true},
		{"9223372036854775807 years", 0, true}, {"", 0, true},
		{"2 seconds", 2000, false}, {"26 hours", 26 * 3600000, false}, {"250 milliseconds", 250, false},
		{"1 hour", 3600000, false}, {"2 days", 2 * 86400000, false}, {"1.5 hours", 5400000, false},
		{"soon", 0, true}, {" 1 second", 0, true}, {"1 Second", 0, true}, {"1second", 0, true},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("Parse(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
		if err == nil && c.want > 0 {
			if back, _ := Parse(Format(got)); back != got {
				t.Errorf("Format(%d) = %q does not parse back", got, Format(got))
			}
		}
	}
}

func TestParseJSON(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{`1500`, 1500, ""},
		{`"2 seconds"`, 2000, ""},
		{`"1 second"`, 1000, ""},
		{`"10 minutes"`, 600000, ""},
		{`"26 hours"`, 26 * 3600000, ""},
		{`"1 week"`, 7 * 86400000, ""},
		{`"1 month"`, 30 * 86400000, ""},
		{`"1 year"`, 365 * 86400000, ""},
		{`"250 milliseconds"`, 250, ""},
		{`"0"`, 0, ""},
		{`"soon"`, 0, `is not a duration`},
		{`-5`, 0, `is not a duration`},
		{`true`, 0, `is not a duration`},
		{`null`, 0, `missing duration`},
	}
	for _, tc := range cases {
		got, err := ParseJSON("timeout", json.RawMessage(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "timeout: ") {
				t.Errorf("ParseJSON(%s) error %v, want %q naming the field", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseJSON(%s) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
