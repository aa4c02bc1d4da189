// Package duration is the one grammar of a Workflows duration (Cloudflare's
// WorkflowDuration), used by admission (internal/webhook), the engine's step configs,
// sleeps and waitForEvent timeouts, and the controller's engine config.
//
// A duration is a number of milliseconds (a JSON number, or a string of digits) or
// "<n> <unit>" with one space and unit millisecond, second, minute, hour, day, week,
// month (30 days) or year (365 days), singular or plural: "250", "10 seconds",
// "1 hour", "2 days", "1.5 hours". See
// https://developers.cloudflare.com/workflows/build/sleeping-and-retrying/.
package duration

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// pattern captures the number and the unit ("" = milliseconds).
var pattern = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(?: (millisecond|second|minute|hour|day|week|month|year)s?)?$`)

var unitMs = map[string]int64{
	"":            1,
	"millisecond": 1,
	"second":      1000,
	"minute":      60 * 1000,
	"hour":        3600 * 1000,
	"day":         86400 * 1000,
	"week":        7 * 86400 * 1000,
	"month":       30 * 86400 * 1000,
	"year":        365 * 86400 * 1000,
}

// forms is what an error says is accepted.
const forms = `want a number of milliseconds or "<n> <unit>" with unit millisecond, second, minute, hour, day, week, month or year`

// Parse reads a duration string into milliseconds (fractions of a millisecond are
// dropped). Errors: not of that shape, or more than math.MaxInt64 ms.
func Parse(s string) (int64, error) {
	m := pattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a duration: %s", s, forms)
	}
	u := unitMs[m[2]]
	if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
		if n > math.MaxInt64/u {
			return 0, fmt.Errorf("%q is not a duration: too large", s)
		}
		return n * u, nil
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil || f*float64(u) >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is not a duration: too large", s)
	}
	return int64(f * float64(u)), nil
}

// ParseJSON reads a duration given as JSON: a number of milliseconds (>= 0) or a
// string for Parse. Errors start with field.
func ParseJSON(field string, raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("%s: missing duration", field)
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 || n >= math.MaxInt64 {
			return 0, fmt.Errorf("%s: %v is not a duration (want milliseconds >= 0)", field, n)
		}
		return int64(n), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s: %s is not a duration (%s)", field, raw, forms)
	}
	ms, err := Parse(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	return ms, nil
}

// Format writes ms as a duration string in the largest whole unit
// (600000 → "10 minutes", 1500 → "1500").
func Format(ms int64) string {
	for _, u := range []string{"year", "week", "day", "hour", "minute", "second"} {
		if f := unitMs[u]; ms >= f && ms%f == 0 {
			n := ms / f
			if n == 1 {
				return "1 " + u
			}
			return strconv.FormatInt(n, 10) + " " + u + "s"
		}
	}
	return strconv.FormatInt(ms, 10)
}
