package channels_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
)

// The batched wait keeps the contract's promises (docs/channels.md "Batched wait"):
// order, nothing consumed until acknowledged (a lost answer is answered again), what a
// batch handed out leaves the backlog, and closed comes after the queue is drained.
func TestWaitBatch(t *testing.T) {
	spec := readSpec(t)
	m, err := channels.NewManager(channels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	k, ctx := channels.Key{Namespace: "ns", Object: "obj"}, context.Background()
	h, _ := m.Subscribe(k, "room")
	for _, s := range []string{"a", "b", "c"} {
		if _, err := m.Publish(k, "room", s); err != nil {
			t.Fatal(err)
		}
	}
	want := func(o channels.Outcome, err error, msgs []string, seq uint64) {
		t.Helper()
		if err != nil || o.Kind != channels.OutcomeMessages || !reflect.DeepEqual(o.Messages, msgs) || o.Seq != seq {
			t.Fatalf("WaitBatch = %+v, %v; want messages %q from seq %d", o, err, msgs, seq)
		}
	}
	o, err := m.WaitBatch(ctx, k, h, 0, 0, 2)
	want(o, err, []string{"a", "b"}, 0)
	o, err = m.WaitBatch(ctx, k, h, 0, 0, 10) // not acknowledged: answered again
	want(o, err, []string{"a", "b", "c"}, 0)
	o, err = m.WaitBatch(ctx, k, h, 0, 2, 10) // a and b consumed
	want(o, err, []string{"c"}, 2)
	// Everything handed out left the backlog: a full backlog more still fits.
	msg := strings.Repeat("z", spec.messageBytes)
	for i := 0; i < spec.backlogBytes/spec.messageBytes; i++ {
		if n, _ := m.Publish(k, "room", msg); n != 1 {
			t.Fatalf("publish %d after the batch reached %d, want 1 (handed-out messages left the backlog)", i+1, n)
		}
	}
	if n, _ := m.Publish(k, "room", "x"); n != 0 {
		t.Fatalf("publish over the backlog reached %d, want 0 (disconnected)", n)
	}
	if o, err := m.Wait(ctx, k, h, 0); err != nil || o.Kind != channels.OutcomeDisconnected || o.Reason != spec.backlogReason {
		t.Fatalf("after the overflow: %+v, %v; want disconnected %q", o, err, spec.backlogReason)
	}

	h2, _ := m.Subscribe(k, "other")
	_, _ = m.Publish(k, "other", "last")
	_, _ = m.CloseChannel(k, "other", "bye")
	o, err = m.WaitBatch(ctx, k, h2, 0, 0, 10)
	want(o, err, []string{"last"}, 0)
	if o, err := m.WaitBatch(ctx, k, h2, 0, 1, 10); err != nil || o.Kind != channels.OutcomeClosed || o.Reason != "bye" {
		t.Fatalf("after the drain: %+v, %v; want closed bye", o, err)
	}
}

// The stream route: a first line at once, then the messages in order, then closed.
func TestStreamRoute(t *testing.T) {
	h := newHarnessSidecarOnly(t)
	base := "http://" + h.sidecarAddr + "/channels/v1/objects/ns/obj/"
	post := func(op, body string) *http.Response {
		res, err := http.Post(base+op, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var sub struct{ Handle string }
	res := post("subscribe", `{"channel":"room"}`)
	_ = json.NewDecoder(res.Body).Decode(&sub)
	res.Body.Close()
	res = post("stream", `{"handle":"`+sub.Handle+`","timeoutMs":60000}`)
	defer res.Body.Close()
	lines := bufio.NewScanner(res.Body)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("stream ended: %v", lines.Err())
		}
		return lines.Text()
	}
	if l := next(); l != `{"outcome":"timeout"}` {
		t.Fatalf("first line %s, want a timeout (the stream is open)", l)
	}
	var got []string
	for i, s := range []string{"one", "two", ""} {
		post("publish", `{"channel":"room","message":"`+s+`"}`).Body.Close()
		var o struct {
			Outcome  string
			Messages []string
			Seq      int
		}
		if err := json.Unmarshal([]byte(next()), &o); err != nil || o.Outcome != "messages" || o.Seq != len(got) {
			t.Fatalf("line after publish %d: %+v, %v", i+1, o, err)
		}
		got = append(got, o.Messages...)
	}
	if want := []string{"one", "two", ""}; !reflect.DeepEqual(got, want) {
		t.Fatalf("streamed %q, want %q", got, want)
	}
	post("close", `{"channel":"room","reason":"done"}`).Body.Close()
	if l := next(); l != `{"outcome":"closed","reason":"done"}` {
		t.Fatalf("last line %s, want closed done", l)
	}
}

// ch.messages in a Durable Object (testdata/worker.js "stream?iterate"): every message in
// publish order over the object's streams request, then the end with the close reason.
func TestMessagesIterator(t *testing.T) {
	h := newHarness(t, 0)
	s := h.openSSE("/o/iter/stream?channel=c&iterate")
	if ev, err := s.next(); err != nil || ev.comment != "subscribed" {
		t.Fatalf("first event %+v, %v; want the subscribed comment", ev, err)
	}
	want := seq("m", 300)
	r := h.ok("iter", "publishMany", map[string]any{"channel": "c", "prefix": "m", "count": len(want)})
	for i, n := range r["reached"].([]any) {
		if n != 1.0 {
			t.Fatalf("publish %d reached %v, want 1", i+1, n)
		}
	}
	h.ok("iter", "close", map[string]any{"channel": "c", "reason": "over"})
	var got []string
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("stream ended after %d messages: %v", len(got), err)
		}
		if ev.name == "end" {
			if ev.data != "closed: over" {
				t.Fatalf("end %q, want closed: over", ev.data)
			}
			break
		}
		if ev.comment == "" {
			got = append(got, ev.data)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %d messages (first %q), want %d in order", len(got), got[:min(3, len(got))], len(want))
	}
}
