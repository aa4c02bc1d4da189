package cron

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// dialectCase is one case of ../shared/testdata/cron-cloudflare-dialect.json, computed
// with Cloudflare's own parser.
type dialectCase struct {
	Expr  string   `json:"expr"`
	After string   `json:"after"`
	Valid bool     `json:"valid"`
	Fires *bool    `json:"fires"`
	Next  []string `json:"next"`
}

func loadDialectCases(t testing.TB) []dialectCase {
	t.Helper()
	b, err := os.ReadFile(testenv.SharedFile(t, "testdata", "cron-cloudflare-dialect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []dialectCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) == 0 {
		t.Fatal("no cases in cron-cloudflare-dialect.json")
	}
	return file.Cases
}

// nextN lists the first n fire times strictly after after, in UTC RFC 3339.
func nextN(s *Schedule, after time.Time, n int, loc *time.Location) []string {
	out := []string{}
	for t := after; len(out) < n; {
		t = s.Next(t, loc)
		if t.IsZero() {
			break
		}
		out = append(out, t.UTC().Format(time.RFC3339))
	}
	return out
}

func TestCloudflareDialectCases(t *testing.T) {
	for _, c := range loadDialectCases(t) {
		t.Run(c.Expr, func(t *testing.T) {
			s, err := Parse(c.Expr)
			if !c.Valid {
				if err == nil {
					t.Fatalf("Parse(%q) accepted an expression Cloudflare rejects", c.Expr)
				}
				var perr *Error
				if !errors.As(err, &perr) || perr.Expr != c.Expr {
					t.Fatalf("Parse(%q) error %v is not an *Error naming the expression", c.Expr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.Expr, err)
			}
			if c.Fires == nil {
				t.Fatalf("case %q has no fires", c.Expr)
			}
			if s.Fires() != *c.Fires {
				t.Fatalf("Fires() = %v, Cloudflare says %v", s.Fires(), *c.Fires)
			}
			after, err := time.Parse(time.RFC3339, c.After)
			if err != nil {
				t.Fatal(err)
			}
			got := nextN(s, after, len(c.Next), time.UTC)
			if strings.Join(got, " ") != strings.Join(c.Next, " ") {
				t.Fatalf("next after %s:\n got  %v\n want %v", c.After, got, c.Next)
			}
			if !s.Fires() {
				if !s.Next(after, nil).IsZero() {
					t.Fatalf("Next of a never-firing schedule is not the zero time")
				}
			}
		})
	}
}

// TestWebhookExamples: the admission examples of issue 8, checked with Validate (the
// webhook's entry point): denied with specific messages, or admitted.
func TestWebhookExamples(t *testing.T) {
	cases := []struct {
		expr  string
		field string   // expected Error.Field ("" = whole expression)
		want  []string // substrings of the message
	}{
		{"0 0 * * 0", FieldDayOfWeek, []string{"1 = Sunday", "write 1 or SUN"}},
		{"0 0 30 2 *", "", []string{"can never fire"}},
		{"0 22-2 * * *", FieldHour, []string{"wraps around", "22-23,0-2"}},
		{"@daily", "", []string{"macros", "0 0 * * *"}},
		{"0 0 0 * * *", "", []string{"6 fields", "exactly 5"}},
		{"0 0 * * * * *", "", []string{"7 fields"}},
		{"0 0 ? * MON", FieldDayOfMonth, []string{"'?'"}},
		{"*/60 * * * *", FieldMinute, []string{"/60", "1-59"}},
		{"0 0 L,15 * *", FieldDayOfMonth, []string{"list"}},
		{"0 0 * * 2#6", FieldDayOfWeek, []string{"1 to 5"}},
		{"0 0 * * FRI-MON", FieldDayOfWeek, []string{"wraps around", "FRI-SAT,SUN-MON"}},
		{"0 0 * * 5,*", FieldDayOfWeek, []string{"'*'"}},
		{"59 23 LW * *", "", nil},
		{"0 18 * * 6L", "", nil},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			s, err := Validate(c.expr)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Validate(%q): %v", c.expr, err)
				}
				if !s.Fires() || s.String() != c.expr {
					t.Fatalf("Validate(%q) returned %v fires=%v", c.expr, s, s.Fires())
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%q) admitted it", c.expr)
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %T is not *Error", err)
			}
			if perr.Field != c.field {
				t.Errorf("Field = %q, want %q (%v)", perr.Field, c.field, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err.Error(), w)
				}
			}
		})
	}
}

// TestTimeZones: next times follow the zone's wall clock across daylight-saving
// transitions (America/New_York 2026: forward on March 8, back on November 1).
func TestTimeZones(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	cases := []struct {
		expr, after string
		want        []string
	}{
		// 09:00 local is 14:00 UTC in winter, 13:00 UTC in summer.
		{"0 9 * * *", "2026-03-06T15:00:00Z", []string{"2026-03-07T14:00:00Z", "2026-03-08T13:00:00Z"}},
		// 02:30 does not exist on March 8: it fires at 03:30 EDT (07:30 UTC), once.
		{"30 2 * * *", "2026-03-07T08:00:00Z", []string{"2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"}},
		// 01:30 occurs twice on November 1: it fires once, at the first (EDT, 05:30 UTC).
		{"30 1 * * *", "2026-10-31T12:00:00Z", []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
	}
	for _, c := range cases {
		s, err := Parse(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := time.Parse(time.RFC3339, c.after)
		got := nextN(s, after, len(c.want), ny)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s after %s in New York: got %v, want %v", c.expr, c.after, got, c.want)
		}
	}
}
