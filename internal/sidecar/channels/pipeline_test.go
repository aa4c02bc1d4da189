package channels_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
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

	pw, pipe := openDuplex(t, base+"pipeline")
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

// A line over the request body limit ends the pipeline with MESSAGE_TOO_LARGE, but the
// lines before it, read in the same buffer, keep their answers: the answers are matched to
// the publishes by order, so a dropped answer would hand the error to an earlier publish
// (which was published) and leave the oversized one unanswered. The answer then ends at
// once though the publisher's body goes on (not after the body timeout, 30 s: the
// client's 10 s timeout is only there to fail rather than wait), and ending a full-duplex
// request before its body does not make net/http panic on the connection
// (https://github.com/golang/go/issues/68560; the server logs the recovered panic).
func TestPipelineLineTooLongAfterBufferedLines(t *testing.T) {
	var logs syncWriter
	logs.w = &bytes.Buffer{}
	log.SetOutput(&logs)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	h := newHarnessSidecarOnly(t)
	base := "http://" + h.sidecarAddr + "/channels/v1/objects/ns/obj/"
	body := `{"channel":"room","message":"a"}` + "\n" + `{"channel":"room","message":"b"}` + "\n" +
		`{"channel":"room","message":"` + strings.Repeat("x", 500<<10) + `"}` + "\n"
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = io.WriteString(pw, body) }() // and the body stays open
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Post(base+"pipeline", "application/x-ndjson", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	answers := bufio.NewScanner(res.Body)
	for i, w := range []string{`{"reached":0}`, `{"reached":0}`, `"MESSAGE_TOO_LARGE"`, ""} {
		if w == "" {
			if answers.Scan() || answers.Err() != nil {
				t.Fatalf("after the error: %q, %v; want the answer's end", answers.Text(), answers.Err())
			}
			break
		}
		if !answers.Scan() {
			t.Fatalf("answer %d: the pipeline ended: %v", i+1, answers.Err())
		}
		if got := answers.Text(); !strings.Contains(got, w) {
			t.Fatalf("answer %d = %s, want %s", i+1, got, w)
		}
	}
	_, _ = io.Copy(io.Discard, res.Body)
	h.stopSidecar(true) // the connection's goroutine is done
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if got := logs.w.(*bytes.Buffer).String(); strings.Contains(got, "panic") {
		t.Fatalf("the sidecar's server logged a panic:\n%s", got)
	}
}

// A message over the size limit is refused on its own: publishes sent with it on the
// object's pipeline are applied and answered (a line over the request body limit would
// end the pipeline, failing them as SIDECAR_UNAVAILABLE).
func TestPublishTooLargeAloneOnPipeline(t *testing.T) {
	h := newHarness(t, 0)
	h.subscribe("big", "c")
	spec := readSpec(t)
	msgs := []string{"a", strings.Repeat("x", 8*spec.messageBytes), "b"}
	r := h.ok("big", "publishTogether", map[string]any{"channel": "c", "messages": msgs})
	if got, want := fmt.Sprint(r["results"]), "[1 MESSAGE_TOO_LARGE 1]"; got != want {
		t.Fatalf("results %s, want %s", got, want)
	}
}
