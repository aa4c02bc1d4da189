package failure

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// conditionReason is metav1.Condition's reason pattern (k8s.io/apimachinery
// pkg/apis/meta/v1 types.go, +kubebuilder:validation:Pattern on Reason).
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

func TestNamesAreConditionReasons(t *testing.T) {
	for _, c := range Classes {
		if !conditionReason.MatchString(string(c)) || len(c) > 1024 {
			t.Errorf("class %q is not a valid metav1.Condition reason", c)
		}
	}
	for _, c := range Causes {
		if !conditionReason.MatchString(string(c)) || len(c) > 1024 {
			t.Errorf("cause %q is not a valid metav1.Condition reason", c)
		}
	}
}

// flagged is a Go error carrying the runtime's flags, the way a Go client of a JS
// component might model them.
type flagged struct {
	msg                   string
	retryable, overloaded bool
}

func (f flagged) Error() string    { return f.msg }
func (f flagged) Retryable() bool  { return f.retryable }
func (f flagged) Overloaded() bool { return f.overloaded }

// TestGoErrorChains: Go wrappers (fmt.Errorf %w, errors.Join) are walked like JS causes.
// Texts from cloudflare-semantics.md §2.4 and seed 003.
func TestGoErrorChains(t *testing.T) {
	lost := flagged{msg: "Network connection lost.", retryable: true}
	over := flagged{msg: "internal error", overloaded: true, retryable: true}
	for _, tc := range []struct {
		name  string
		err   error
		want  Class
		cause Cause
	}{
		{"nil is no failure", nil, "", CauseUnknown},
		{"plain error", errors.New("boom"), ClassPermanent, CauseUnknown},
		{"wrapped connection loss", fmt.Errorf("step 2: %w", lost), ClassConnectionLost, CauseUnknown},
		{"retryable flag deep in the chain", fmt.Errorf("a: %w", fmt.Errorf("b: %w", flagged{msg: "internal error", retryable: true})), ClassRetryableFlag, CauseUnknown},
		{"overloaded flag vetoes through a wrapper", fmt.Errorf("call: %w", over), ClassOverloaded, CauseUnknown},
		{"errors.Join with an overloaded member", errors.Join(errors.New("Durable Object reset because its code was updated."), over), ClassOverloaded, CauseUnknown},
		{"errors.Join, transient member", errors.Join(errors.New("boom"), lost), ClassConnectionLost, CauseUnknown},
		{"SQLITE_FULL wrapped", fmt.Errorf("put: %w", errors.New("database or disk is full: SQLITE_FULL")), ClassPermanent, CauseSQLiteFull},
		{"JS error in a Go wrapper", fmt.Errorf("router: %w", &JSError{Message: "outer", Cause: &JSError{Message: "Durable Object storage operation exceeded timeout which caused object to be reset.", IsRetryable: true}}), ClassStorageReset, CauseRPCTimeout},
		{"JS cause carried only as prose", errors.New("Error: step failed\n  [cause]: Error: Network connection lost."), ClassConnectionLost, CauseUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassifyCall(tc.err); got != tc.want {
				t.Errorf("ClassifyCall = %q, want %q", got, tc.want)
			}
			if got := ClassifyError(tc.err); got != tc.cause {
				t.Errorf("ClassifyError = %q, want %q", got, tc.cause)
			}
		})
	}
}

// loop is an error whose cause is itself: the walk must end.
type loop struct{}

func (l *loop) Error() string { return "loop" }
func (l *loop) Unwrap() error { return l }

func TestCycleEnds(t *testing.T) {
	if got := ClassifyCall(&loop{}); got != ClassPermanent {
		t.Errorf("ClassifyCall(cycle) = %q, want %q", got, ClassPermanent)
	}
}

func TestIsRetryable(t *testing.T) {
	want := map[Class]bool{ClassSupersededIsolate: true, ClassConnectionLost: true, ClassStorageReset: true, ClassRetryableFlag: true, ClassOverloaded: false, ClassPermanent: false, "": false, "nonsense": false}
	for c, w := range want {
		if got := IsRetryable(c); got != w {
			t.Errorf("IsRetryable(%q) = %v, want %v", c, got, w)
		}
	}
}

func TestEvidenceIsTrimmed(t *testing.T) {
	long := "service main: Uncaught Error: " + strings.Repeat("é", 2*MaxEvidenceBytes)
	c, ev := Diagnose(Termination{ExitCode: 1, Message: long})
	if c != CauseStartupError {
		t.Fatalf("cause %s, want %s", c, CauseStartupError)
	}
	if len(ev) > MaxEvidenceBytes || !utf8.ValidString(ev) || !strings.HasSuffix(ev, "…") {
		t.Errorf("evidence: %d bytes (limit %d), valid UTF-8 %v, suffix %q", len(ev), MaxEvidenceBytes, utf8.ValidString(ev), ev[len(ev)-8:])
	}
}

func TestEvidenceNamesTheLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Termination
		want string
	}{
		{"startup error with its stack", Termination{ExitCode: 1, Message: "noise\nservice bad: Uncaught Error: startup kaboom\n  at bad.js:1:7\nmore"}, "service bad: Uncaught Error: startup kaboom\n  at bad.js:1:7"},
		{"JSON heap line", Termination{ExitCode: 1, Message: `{"level":"fatal","message":"V8 fatal error; location = Reached heap limit; message = : allocation failed: JavaScript heap out of memory"}`}, "V8 fatal error; location = Reached heap limit; message = : allocation failed: JavaScript heap out of memory"},
		{"OOMKilled", Termination{ExitCode: 137, Reason: "OOMKilled"}, "container reason OOMKilled, exit code 137 (cgroup memory limit)"},
		{"SQLITE_FULL line", Termination{ExitCode: 1, Logs: []string{"a", "Uncaught exception: database or disk is full: SQLITE_FULL", "b"}}, "Uncaught exception: database or disk is full: SQLITE_FULL"},
		{"unknown", Termination{ExitCode: 3, Reason: "Error", Message: "bye"}, "exit code 3, reason Error; last line: bye"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ev := Diagnose(tc.t); ev != tc.want {
				t.Errorf("evidence %q, want %q", ev, tc.want)
			}
		})
	}
}

func TestParseJSError(t *testing.T) {
	e, err := ParseJSError([]byte(`{"message":"outer","cause":{"message":"Network connection lost.","retryable":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ClassifyCall(e); got != ClassConnectionLost {
		t.Errorf("ClassifyCall = %q, want %q", got, ClassConnectionLost)
	}
	if _, err := ParseJSError([]byte(`{"message":1}`)); err == nil || !strings.Contains(err.Error(), "message") {
		t.Errorf("bad JSON: error %v does not name the field", err)
	}
}
