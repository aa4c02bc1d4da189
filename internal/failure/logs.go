package failure

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// logLevels are the levels of workerd's structured lines that can name a failure; its
// info and warning lines describe normal operation.
var logLevels = map[string]bool{"error": true, "fatal": true}

// errIDPattern is the reference workerd gives an internal error: the script sees
// "internal error; reference = <id>", the log line carries "wdErrId = <id>".
var errIDPattern = regexp.MustCompile(`wdErrId = (\w+)`)

// structuredLine is one line of workerd's structured logging
// (`logging = (structuredLogging = true)`): its own lines carry "source" (the C++ or
// Rust file), the Worker's console output does not. "timestamp" is milliseconds since
// the epoch, as a number or a string.
type structuredLine struct {
	Timestamp json.RawMessage `json:"timestamp"`
	Level     string          `json:"level"`
	Source    string          `json:"source"`
	Message   string          `json:"message"`
}

// ClassifyLog returns the newest failure a running container's log shows after `after`
// (nil when none), and the time of the newest line read (zero when no line had one):
// the caller's next `after`.
//
// log is what the API server serves for pods/log with timestamps=true: each line
// prefixed "<RFC3339Nano> " (a line without the prefix takes the time of workerd's own
// "timestamp" field). A last line without a newline (cut by limitBytes) is left for the
// next read. Only workerd's own lines are classified: structured lines with a "source"
// at level error or fatal, and plain-text lines (workerd writes those before it applies
// the config's logging). The Worker's console output is its own business; a line without
// any time cannot be ordered and is skipped. Each line's message is matched line by line
// with ClassifyMessage (the rules of every other cause); a line the rules do not name
// (unknown) is not a failure. The evidence is the matching line plus workerd's reference
// of the error, which the script saw as "internal error; reference = <id>".
//
// The failure's Time is the line's, at the second precision the API stores, so that a
// status holding it compares equal after a round trip.
func ClassifyLog(pod, container string, log []byte, after time.Time) (*Failure, time.Time) {
	var newest *Failure
	var last time.Time
	for len(log) > 0 {
		i := bytes.IndexByte(log, '\n')
		if i < 0 {
			break
		}
		line := string(bytes.TrimRight(log[:i], "\r"))
		log = log[i+1:]
		at, text := logLine(line)
		if at.IsZero() {
			continue
		}
		if at.After(last) {
			last = at
		}
		if !at.After(after) || text == "" {
			continue
		}
		if c, ev := classifyText(text); c != CauseUnknown {
			newest = &Failure{Cause: c, Message: trim(ev), Pod: pod, Container: container, Logged: true,
				Time: metav1.NewTime(at.Truncate(time.Second).Local())}
		}
	}
	return newest, last
}

// logLine splits a served log line into its time and the text to classify ("" for a
// line that is not workerd's failure report).
func logLine(line string) (time.Time, string) {
	var at time.Time
	if sp := strings.IndexByte(line, ' '); sp > 0 {
		if t, err := time.Parse(time.RFC3339Nano, line[:sp]); err == nil {
			at, line = t, line[sp+1:]
		}
	}
	trimmed := strings.TrimSpace(line)
	if !strings.HasPrefix(trimmed, "{") {
		return at, trimmed
	}
	var s structuredLine
	if json.Unmarshal([]byte(trimmed), &s) != nil {
		return at, trimmed
	}
	if at.IsZero() {
		at = millis(s.Timestamp)
	}
	if s.Source == "" || !logLevels[s.Level] {
		return at, ""
	}
	return at, s.Message
}

// millis parses workerd's "timestamp" (milliseconds since the epoch, a number or a
// string); zero when absent or not a number.
func millis(raw json.RawMessage) time.Time {
	n, err := strconv.ParseInt(strings.Trim(string(raw), `"`), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// classifyText classifies text line by line: the first line a rule names, with the
// reference of workerd's error when the text has one.
func classifyText(text string) (Cause, string) {
	for _, l := range strings.Split(text, "\n") {
		c := ClassifyMessage(l)
		if c == CauseUnknown {
			continue
		}
		ev := strings.TrimSpace(l)
		if m := errIDPattern.FindStringSubmatch(text); m != nil && !strings.Contains(ev, m[1]) {
			ev += " (reference = " + m[1] + ")"
		}
		return c, ev
	}
	return CauseUnknown, ""
}
