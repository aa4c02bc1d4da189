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
