package webhook

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestCompatFlagsMatchWorkerd checks pinnedCompatFields against the pinned workerd
// binary itself, in one `workerd serve` of a config with one service per question,
// whose start-up errors ("service sN: ...") answer them:
//   - every flag at compatibility date 2000-01-01: refused as experimental exactly when
//     the table says so, as "the default" exactly for all-dates enable flags, else
//     accepted;
//   - every enable flag dated up to the newest admitted date: refused at its date ("became the default as of"),
//     accepted the day before;
//   - both flags of a field together: "mutually contradictory";
//   - a name not in the table: "No such compatibility flag";
//   - PinnedSupportedCompatibilityDate is accepted, the day after it refused.
//
// Flags of Python Workers are left out: a Python flag makes workerd fetch the Pyodide
// bundle from the Internet, and tests talk only to loopback.
func TestCompatFlagsMatchWorkerd(t *testing.T) {
	bin := testenv.WorkerdBinary(t)
	newest, err := NewestCompatibilityDate(PinnedWorkerdVersion)
	if err != nil {
		t.Fatal(err)
	}
	type question struct {
		date  string
		flags []string
		want  string // substring of the service's error; "" = no error
	}
	var qs []question
	python := func(f compatField) bool { return strings.Contains(strings.Join(f.flags, " "), "python") }
	for _, f := range pinnedCompatFields {
		if python(f) {
			continue
		}
		for _, fl := range f.flags {
			want := ""
			switch {
			case fl == f.experimental:
				want = "The compatibility flag " + fl + " is experimental"
			case fl == f.enable && f.allDates:
				want = "The compatibility flag " + fl + " is the default"
			}
			qs = append(qs, question{"2000-01-01", []string{fl}, want})
		}
		// An enable date after the newest date the webhook admits cannot be reached.
		if f.enable != "" && f.date != "" && f.date <= newest && f.experimental == "" {
			qs = append(qs, question{f.date, []string{f.enable}, "The compatibility flag " + f.enable + " became the default as of " + f.date},
				question{dayBefore(f.date), []string{f.enable}, ""})
		}
		if len(f.flags) == 2 && f.experimental == "" && !f.allDates {
			qs = append(qs, question{"2000-01-01", f.flags, "Compatibility flags are mutually contradictory"})
		}
	}
	qs = append(qs, question{"2000-01-01", []string{"definitely_not_a_flag"}, "No such compatibility flag: definitely_not_a_flag"},
		// The newest compatibility date the binary supports.
		question{PinnedSupportedCompatibilityDate, nil, ""},
		question{dayAfter(PinnedSupportedCompatibilityDate), nil, fmt.Sprintf("the newest date supported by this server binary is %q", PinnedSupportedCompatibilityDate)})
	// Completeness: every lowercase word of the binary's CompatibilityFlags schema that
	// the table lacks must be unknown to workerd (capnp field names such as obsolete3),
	// so a flag a newer pinned workerd adds fails here instead of being refused at
	// admission.
	extra, err := schemaWordsNotInTable(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range extra {
		if strings.Contains(w, "python") {
			t.Errorf("%q is in workerd's CompatibilityFlags schema but not in pinnedCompatFields (not asked: a Python flag makes workerd fetch Pyodide)", w)
			continue
		}
		qs = append(qs, question{"2000-01-01", []string{w}, "No such compatibility flag: " + w})
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.js"), []byte("export default { fetch() { return new Response('ok') } }"), 0o644); err != nil {
		t.Fatal(err)
	}
	var svcs, workers []string
	for i, q := range qs {
		svcs = append(svcs, fmt.Sprintf(`(name = "s%d", worker = .w%d)`, i, i))
		quoted := make([]string, len(q.flags))
		for j, f := range q.flags {
			quoted[j] = strconv.Quote(f)
		}
		workers = append(workers, fmt.Sprintf(`const w%d :Workerd.Worker = (modules = [(name = "w.js", esModule = embed "w.js")], compatibilityDate = %q, compatibilityFlags = [%s]);`, i, q.date, strings.Join(quoted, ", ")))
	}
	cfg := "using Workerd = import \"/workerd/workerd.capnp\";\n" +
		"const config :Workerd.Config = (services = [" + strings.Join(svcs, ", ") + "], sockets = [(name = \"http\", address = \"127.0.0.1:0\", http = (), service = \"s0\")]);\n" +
		strings.Join(workers, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "config.capnp"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// The unknown flag makes workerd exit 1 after listing every service's errors; the
	// context only bounds a workerd that would start serving regardless.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", filepath.Join(dir, "config.capnp")).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("workerd serve: %v (want exit status 1 from the config errors)\n%s", err, out)
	}
	got := map[int][]string{}
	re := regexp.MustCompile(`(?m)^service s([0-9]+): (.*)$`)
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		i, _ := strconv.Atoi(m[1])
		got[i] = append(got[i], m[2])
	}
	for i, q := range qs {
		msgs := strings.Join(got[i], " | ")
		switch {
		case q.want == "" && msgs != "":
			t.Errorf("flags %q at %s: workerd says %q; the table says it is accepted", q.flags, q.date, msgs)
		case q.want != "" && !strings.Contains(msgs, q.want):
			t.Errorf("flags %q at %s: workerd says %q; the table expects %q", q.flags, q.date, msgs, q.want)
		}
	}
	t.Logf("%d questions to workerd about %d fields and %d other schema words", len(qs), len(pinnedCompatFields), len(extra))
}

// schemaMarker starts the CompatibilityFlags schema node compiled into workerd; its
// field names, flag names and dates follow as NUL-terminated texts.
const schemaMarker = "workerd/io/compatibility-date.capnp:CompatibilityFlags"

// schemaWindow is how many bytes after schemaMarker are searched: twice the 77,584
// bytes the schema of workerd 1.20261117.1 spans, for the flags later versions add.
const schemaWindow = 160 << 10

// schemaWordsNotInTable returns the lowercase words (the shape of a flag name) in the
// schema window of workerd binary bin that pinnedCompatFields does not list.
func schemaWordsNotInTable(bin string) ([]string, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	i := bytes.Index(b, []byte(schemaMarker))
	if i < 0 {
		return nil, fmt.Errorf("%s: no %q", bin, schemaMarker)
	}
	end := min(len(b), i+schemaWindow)
	word := regexp.MustCompile(`^[a-z][a-z0-9_-]{2,}$`)
	seen := map[string]bool{}
	var out []string
	for _, w := range bytes.FieldsFunc(b[i+len(schemaMarker):end], func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		s := string(w)
		if !word.MatchString(s) || seen[s] || pinnedFlags[s] != nil {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, nil
}
