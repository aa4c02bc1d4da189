package webhook

import (
	"crypto/rand"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestScriptSizeDocumented checks the documented script-size limits just inside and
// just outside for each profile and both rule generations. The values are above what
// etcd stores in one object, so this runs without the API server.
func TestScriptSizeDocumented(t *testing.T) {
	tbl := limits.Default()
	random := func(n int64) []byte { // incompressible, so gzip size ≈ n
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	type tc struct {
		name  string
		rules string
		p     limits.Profile
		mods  [][]byte
		want  limits.Name // "" = admitted
	}
	var cases []tc
	for _, p := range limits.Profiles {
		max := tbl.Get(p, limits.ScriptSizeBytes)
		cases = append(cases,
			tc{"2026-" + string(p) + "-inside", ScriptSizeRules2026, p, [][]byte{make([]byte, max-1), {0}}, ""},
			tc{"2026-" + string(p) + "-outside", ScriptSizeRules2026, p, [][]byte{make([]byte, max), {0}}, limits.ScriptSizeBytes},
		)
		gz := tbl.Get(p, limits.ScriptSize2024GzBytes)
		cases = append(cases,
			tc{"2024-gzip-" + string(p) + "-inside", ScriptSizeRules2024, p, [][]byte{random(gz - 64*1024)}, ""},
			tc{"2024-gzip-" + string(p) + "-outside", ScriptSizeRules2024, p, [][]byte{random(gz + 1)}, limits.ScriptSize2024GzBytes},
		)
		raw := tbl.Get(p, limits.ScriptSize2024Bytes)
		cases = append(cases, tc{"2024-raw-" + string(p) + "-outside", ScriptSizeRules2024, p, [][]byte{make([]byte, raw+1)}, limits.ScriptSize2024Bytes})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chk := &check{t: tbl, p: c.p}
			validateScriptSize(chk, c.rules, field.NewPath("spec", "source", "inline", "modules"), c.mods)
			if c.want == "" {
				if len(chk.errs) != 0 {
					t.Fatalf("rejected: %v", chk.errs)
				}
				return
			}
			l, _ := tbl.Limit(c.want)
			if len(chk.errs) != 1 {
				t.Fatalf("errors %v, want one for %s", chk.errs, c.want)
			}
			msg := chk.errs[0].Error()
			for _, want := range []string{"spec.source.inline.modules", "limit " + string(c.want), "source: " + l.Source, `profile "` + string(c.p) + `"`} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q lacks %q", msg, want)
				}
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
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
	}
	for _, c := range cases {
		got, err := ParseDuration(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseDuration(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
		if err == nil && c.want > 0 {
			if back, _ := ParseDuration(FormatDuration(got)); back != got {
				t.Errorf("FormatDuration(%d) = %q does not parse back", got, FormatDuration(got))
			}
		}
	}
}

func TestNewestCompatibilityDate(t *testing.T) {
	for in, want := range map[string]string{"1.20261117.1": "2026-11-17", "1.20240101.0": "2024-01-01"} {
		if got, err := NewestCompatibilityDate(in); err != nil || got != want {
			t.Errorf("NewestCompatibilityDate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1.2026111.1", "1.20261317.1", "v1.20261117.1"} {
		if _, err := NewestCompatibilityDate(bad); err == nil {
			t.Errorf("NewestCompatibilityDate(%q): no error", bad)
		}
	}
}

// TestPinnedWorkerdVersion keeps the webhook's default workerd in step with the one the
// tests and the Makefile install.
func TestPinnedWorkerdVersion(t *testing.T) {
	if PinnedWorkerdVersion != testenv.WorkerdVersion {
		t.Fatalf("PinnedWorkerdVersion %s, testenv.WorkerdVersion %s", PinnedWorkerdVersion, testenv.WorkerdVersion)
	}
}
