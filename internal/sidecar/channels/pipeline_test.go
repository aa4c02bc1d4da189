package channels_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// The pipeline route (docs/channels.md "Pipelined publish"): publishes sent on one
// request body are answered line by line in order, a bad line is answered with its error
// and the pipeline goes on, and subscribers receive the messages in publish order — text
// that JSON escapes (quotes, HTML characters, U+2028, non-ASCII) comes out of the stream
// as it went in.
func TestPipelineRoute(t *testing.T) {
	h := newHarnessSidecarOnly(t)
	base := "http://" + h.sidecarAddr + "/channels/v1/objects/ns/obj/"
	var sub struct{ Handle string }
	res, err := http.Post(base+"subscribe", "application/json", strings.NewReader(`{"channel":"room"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(res.Body).Decode(&sub)
	res.Body.Close()
	stream, err := http.Post(base+"stream", "application/json", strings.NewReader(`{"handle":"`+sub.Handle+`","timeoutMs":60000}`))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()

	pr, pw := io.Pipe()
	defer pw.Close()
	pipe, err := http.Post(base+"pipeline", "application/x-ndjson", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Body.Close()
	answers := bufio.NewScanner(pipe.Body)
	msgs := []string{"one", `"quoted" \ <b>&amp;`, "naïve \u2028 ☃", ""}
	var lines strings.Builder
	for _, m := range msgs {
		b, _ := json.Marshal(map[string]string{"channel": "room", "message": m})
		lines.Write(append(b, '\n'))
	}
	lines.WriteString("{\"channel\":\"room\"}\n") // no message: an error answer, then on
	b, _ := json.Marshal(map[string]string{"channel": "room", "message": "after"})
	lines.Write(append(b, '\n'))
	if _, err := io.WriteString(pw, lines.String()); err != nil { // all at once: pipelined
		t.Fatal(err)
	}
	want := []string{`{"reached":1}`, `{"reached":1}`, `{"reached":1}`, `{"reached":1}`, "INVALID_ARGUMENT", `{"reached":1}`}
	for i, w := range want {
		if !answers.Scan() {
			t.Fatalf("answer %d: the pipeline ended: %v", i+1, answers.Err())
		}
		if got := answers.Text(); !strings.Contains(got, w) {
			t.Fatalf("answer %d = %s, want %s", i+1, got, w)
		}
	}
	pw.Close()
	if answers.Scan() {
		t.Fatalf("an answer after the last line: %s", answers.Text())
	}

	dec := json.NewDecoder(stream.Body)
	var got []string
	for len(got) < len(msgs)+1 {
		var o struct {
			Outcome  string
			Messages []string
		}
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("stream after %d messages: %v", len(got), err)
		}
		got = append(got, o.Messages...)
	}
	if want := append(msgs, "after"); !reflect.DeepEqual(got, want) {
		t.Fatalf("streamed %q, want %q", got, want)
	}
}
