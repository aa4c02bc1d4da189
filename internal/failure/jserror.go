package failure

import (
	"encoding/json"
	"fmt"
	"strings"
)

// JSError is a JavaScript error carried into Go: the shape workerd gives a failed
// Durable Object call (message, `.retryable`, `.overloaded`, `.remote`), its ES2022
// `cause` and, for an AggregateError, its `errors`. It is the "error" of
// testdata/vectors.json and what a JS component sends when it reports an error to Go
// (encode it with JSON field names message, name, retryable, overloaded, remote, cause,
// errors).
type JSError struct {
	// Name is the error's class name, e.g. "Error", "TypeError"; informational.
	Name string `json:"name,omitempty"`
	// Message is the error's own message (without its causes).
	Message string `json:"message"`
	// IsRetryable is `.retryable === true`.
	IsRetryable bool `json:"retryable,omitempty"`
	// IsOverloaded is `.overloaded === true`.
	IsOverloaded bool `json:"overloaded,omitempty"`
	// Remote is `.remote === true`: the error was thrown by user code in another isolate.
	Remote bool `json:"remote,omitempty"`
	// Cause is the ES2022 `cause`, when it is an error.
	Cause *JSError `json:"cause,omitempty"`
	// Errors are an AggregateError's `errors`.
	Errors []*JSError `json:"errors,omitempty"`
}

// Error renders the message followed by the causes' messages, ": "-joined, the way a
// Go wrapper would.
func (e *JSError) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	for _, c := range e.children() {
		fmt.Fprintf(&b, ": %s", c.Error())
	}
	return b.String()
}

// Unwrap returns the cause followed by the aggregated errors.
func (e *JSError) Unwrap() []error {
	cs := e.children()
	out := make([]error, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

func (e *JSError) children() []*JSError {
	var out []*JSError
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	for _, c := range e.Errors {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// Retryable implements Retryabler.
func (e *JSError) Retryable() bool { return e.IsRetryable }

// Overloaded implements Overloader.
func (e *JSError) Overloaded() bool { return e.IsOverloaded }

// ParseJSError decodes a JSError from JSON; the error names the offending field.
func ParseJSError(b []byte) (*JSError, error) {
	var e JSError
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("failure: decoding a JavaScript error (fields message, name, retryable, overloaded, remote, cause, errors): %w", err)
	}
	return &e, nil
}
