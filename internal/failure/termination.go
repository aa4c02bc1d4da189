package failure

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Termination is what a dead workerd container leaves behind: the fields of
// corev1.ContainerStateTerminated that matter, the pod's reason and any log lines.
// It is also the "termination" of testdata/vectors.json (JSON names in the tags).
type Termination struct {
	// ExitCode of the process; 128+n means killed by signal n.
	ExitCode int32 `json:"exitCode"`
	// Signal that killed the process, 0 when none was reported (kubelet often leaves it
	// 0 and reports 128+n as ExitCode).
	Signal int32 `json:"signal,omitempty"`
	// Reason is the container's terminated reason: "OOMKilled", "Error", "Completed",
	// "ContainerCannotRun", ...
	Reason string `json:"reason,omitempty"`
	// Message is the termination message; with terminationMessagePolicy
	// FallbackToLogsOnError it is the tail of the container's log (kubelet: at most 80
	// lines / 2048 bytes).
	Message string `json:"message,omitempty"`
	// Logs are further log lines (stdout and stderr, oldest first), when the caller has
	// them. Lines may be workerd's structured JSON lines; their "message" is used.
	Logs []string `json:"logs,omitempty"`
	// PodReason is pod.status.reason, e.g. "Evicted".
	PodReason string `json:"podReason,omitempty"`
}

// MaxEvidenceBytes bounds the evidence Diagnose returns (and Failure.Message): long
// enough for a workerd error line with its first stack frames, short enough for a
// condition message.
const MaxEvidenceBytes = 1024

var (
	// serviceLine is workerd's config error reporter format: "service <name>: <error>"
	// (workerd's src/workerd/server/server.c++, ConfigErrorReporter).
	serviceLine = regexp.MustCompile(`^service ([^\s:]+): (.+)$`)
	// capnpLine is a capnp config parse/type error: "<file>.capnp:<line>:<col>[-<col>]: <text>"
	// (observed with the pinned workerd: "config.capnp:2:1: Parse error.").
	capnpLine = regexp.MustCompile(`^\S+\.capnp:\d+:\d+(?:-\d+)?: (.+)$`)
	// signalLine is KJ's crash handler line: "*** Received signal #6: Aborted".
	signalLine = regexp.MustCompile(`\*\*\* received signal #(\d+)`)
	// startupRule: upstream strings used when no config error reporter is attached
	// (workerd's src/workerd/io/worker.c++).
	startupRule = rule{sub: []string{"script startup threw exception", "script startup exceeded resource limits"}}
	// configRule: workerd's watch-mode message for a config that does not load.
	configRule = rule{sub: []string{"can't start server due to config errors"}}
)

// ClassifyTermination returns the Cause of a container's termination; see Diagnose.
func ClassifyTermination(t Termination) Cause {
	c, _ := Diagnose(t)
	return c
}

// Diagnose returns the Cause of a container's termination and the evidence that
// decided it (at most MaxEvidenceBytes bytes, UTF-8 safe). Lines are the termination
// message's and the logs' (structured JSON lines contribute their "message"). The
// first step that answers wins:
//
//  1. PodReason "Evicted" → hard_evict.
//  2. Reason "OOMKilled" → oom (the cgroup OOM killer).
//  3. A line of the image-check init container (ImageLinkPhrase) → image_link_outside;
//     before the message rules, as the file names it quotes are the Worker author's.
//  4. A V8 heap exhaustion line ("Reached heap limit", "JavaScript heap out of
//     memory", "last resort; GC in old space requested") → oom (workerd aborts and
//     exits 1).
//  5. workerd's config loader: a capnp error line, a `service <name>: ...` line that is
//     not `Uncaught ...`, or "Can't start server due to config errors" → config_error;
//     else a `service <name>: Uncaught ...` line or "script startup threw exception" →
//     startup_error. (A config error is reported before the module is even run, so it
//     wins over a startup exception printed in the same output.)
//  6. ClassifyMessage over all lines, when it is not unknown.
//  7. The signal (Signal, else ExitCode-128 for 129..192, else a "*** Received signal
//     #n" line): 9 (SIGKILL, exit 137) → oom — without reason OOMKilled this is either
//     the kernel OOM killer or a kill after the grace period, the evidence says so;
//     6 (SIGABRT, exit 134) → oom, workerd's observed abort is the V8 heap limit.
//  8. unknown.
func Diagnose(t Termination) (Cause, string) {
	lines := terminationLines(t)
	if t.PodReason == "Evicted" {
		return CauseHardEvict, trim("pod evicted (pod.status.reason Evicted)" + lastLineSuffix(lines))
	}
	if t.Reason == "OOMKilled" {
		return CauseOOM, trim(fmt.Sprintf("container reason OOMKilled, exit code %d (cgroup memory limit)", t.ExitCode) + lastLineSuffix(lines))
	}
	for _, l := range lines {
		if strings.Contains(l, ImageLinkPhrase) {
			return CauseImageLinkOutside, trim(l)
		}
	}
	// The fatal line is better evidence than V8's GC trailer printed before it.
	for _, r := range []rule{heapFatalRule, heapRule} {
		for _, l := range lines {
			if r.match(strings.ToLower(l)) {
				return CauseOOM, trim(l)
			}
		}
	}
	startup := -1
	for i, l := range lines {
		low := strings.ToLower(l)
		if m := serviceLine.FindStringSubmatch(l); m != nil {
			if strings.HasPrefix(m[2], "Uncaught ") {
				if startup < 0 {
					startup = i
				}
				continue
			}
			return CauseConfigError, trim(l)
		}
		if capnpLine.MatchString(l) || configRule.match(low) {
			return CauseConfigError, trim(l)
		}
		if startup < 0 && startupRule.match(low) {
			startup = i
		}
	}
	if startup >= 0 {
		return CauseStartupError, trim(withStack(lines, startup))
	}
	if c := ClassifyMessage(strings.Join(lines, "\n")); c != CauseUnknown {
		for _, l := range lines {
			if ClassifyMessage(l) == c {
				return c, trim(l)
			}
		}
		return c, trim(strings.Join(lines, "\n"))
	}
	sig := t.Signal
	if sig == 0 && t.ExitCode > 128 && t.ExitCode <= 128+64 {
		sig = t.ExitCode - 128
	}
	if sig == 0 {
		for _, l := range lines {
			if m := signalLine.FindStringSubmatch(strings.ToLower(l)); m != nil {
				n, _ := strconv.Atoi(m[1])
				sig = int32(n)
				break
			}
		}
	}
	switch sig {
	case 9:
		return CauseOOM, trim(fmt.Sprintf("exit code %d, SIGKILL without reason OOMKilled: the kernel OOM killer, or a kill after the termination grace period (e.g. a failed liveness probe)", t.ExitCode) + lastLineSuffix(lines))
	case 6:
		return CauseOOM, trim(fmt.Sprintf("exit code %d, SIGABRT without a heap line: workerd aborts on V8 fatal errors, observed for heap exhaustion", t.ExitCode) + lastLineSuffix(lines))
	}
	return CauseUnknown, trim(fmt.Sprintf("exit code %d", t.ExitCode) + reasonSuffix(t.Reason) + lastLineSuffix(lines))
}

// terminationLines splits the message and the logs into lines, replacing a structured
// JSON log line by its "message" (itself split into lines); empty lines are dropped.
func terminationLines(t Termination) []string {
	var out []string
	add := func(text string) {
		for _, l := range strings.Split(text, "\n") {
			l = strings.TrimRight(l, "\r")
			if strings.TrimSpace(l) == "" {
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(l), "{") {
				var obj map[string]any
				if json.Unmarshal([]byte(strings.TrimSpace(l)), &obj) == nil {
					if msg, ok := obj["message"].(string); ok {
						for _, ml := range strings.Split(msg, "\n") {
							if strings.TrimSpace(ml) != "" {
								out = append(out, strings.TrimRight(ml, "\r"))
							}
						}
						continue
					}
				}
			}
			out = append(out, l)
		}
	}
	add(t.Message)
	for _, l := range t.Logs {
		add(l)
	}
	return out
}

// withStack is line i followed by up to three stack lines ("  at ...") after it.
func withStack(lines []string, i int) string {
	s := lines[i]
	for j := i + 1; j < len(lines) && j <= i+3; j++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[j]), "at ") {
			break
		}
		s += "\n" + lines[j]
	}
	return s
}

func lastLineSuffix(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return "; last line: " + lines[len(lines)-1]
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ", reason " + r
}

// trim cuts s to MaxEvidenceBytes at a rune boundary, marking the cut with "…".
func trim(s string) string {
	if len(s) <= MaxEvidenceBytes {
		return s
	}
	cut := MaxEvidenceBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
