package workflows

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var durationRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*(millisecond|second|minute|hour|day|week|month|year)s?\s*$`)

var unitMs = map[string]float64{
	"millisecond": 1,
	"second":      1000,
	"minute":      60 * 1000,
	"hour":        3600 * 1000,
	"day":         86400 * 1000,
	"week":        7 * 86400 * 1000,
	"month":       30 * 86400 * 1000,
	"year":        365 * 86400 * 1000,
}

// ParseDuration reads a Workflows duration: a JSON number of milliseconds or a string
// "<n> <unit>[s]" with unit millisecond, second, minute, hour, day, week, month (30 days)
// or year (365 days) (cloudflare-semantics.md §3.2; api/v1alpha1 WorkflowDurationPattern).
// It returns milliseconds. Errors name field and the accepted forms.
func ParseDuration(field string, raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("%s: missing duration", field)
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return 0, fmt.Errorf("%s: %v is not a duration (want milliseconds >= 0)", field, n)
		}
		return int64(n), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s: %s is not a duration (want milliseconds or \"<n> <unit>\")", field, raw)
	}
	return ParseDurationString(field, s)
}

// ParseDurationString is ParseDuration for a string ("2 seconds", "10 minutes", "1500").
func ParseDurationString(field, s string) (int64, error) {
	if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && v >= 0 {
		return int64(v), nil
	}
	m := durationRE.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, fmt.Errorf("%s: %q is not a duration (want milliseconds or \"<n> <unit>\" with unit millisecond|second|minute|hour|day|week|month|year)", field, s)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return int64(v * unitMs[m[2]]), nil
}
