package channels_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Done-means 8: the seed's composite example, driven by real HTTP clients: /connect streams
// server-sent events (heartbeats, forwarded channel messages), /dispatch and /chunk are
// other requests that publish, and a new /connect replaces the old one, whose stream ends
// with a reason.
func TestCompositeConnectDispatchChunk(t *testing.T) {
	h := newHarness(t, 0)
	first := h.openSSE("/c/provider/connect?heartbeatMs=100")
	if ev, err := first.next(); err != nil || ev.name != "open" {
		t.Fatalf("first /connect: %v %v, want event open", ev, err)
	}
	// Heartbeats while nothing is published (the stream stays alive through wait timeouts).
	for {
		ev, err := first.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.comment == "heartbeat" {
			break
		}
		t.Fatalf("before any dispatch: %+v, want a heartbeat", ev)
	}
	post := func(op, body string) int {
		res, err := h.client.Post(h.base+"/c/provider/"+op, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r struct{ Reached int }
		if err := json.NewDecoder(res.Body).Decode(&r); err != nil || res.StatusCode != 200 {
			t.Fatalf("POST %s: %d %v", op, res.StatusCode, err)
		}
		return r.Reached
	}
	type msg struct{ Type, Body string }
	expectMessages := func(s *sse, want []msg) {
		t.Helper()
		for i := 0; i < len(want); {
			ev, err := s.next()
			if err != nil {
				t.Fatalf("stream ended before message %d: %v", i, err)
			}
			if ev.comment == "heartbeat" {
				continue
			}
			var got msg
			if ev.name != "message" || json.Unmarshal([]byte(ev.data), &got) != nil || got != want[i] {
				t.Fatalf("event %d: %+v, want message %+v", i, ev, want[i])
			}
			i++
		}
	}
	var want []msg
	for i, op := range []string{"dispatch", "chunk", "chunk", "chunk", "dispatch"} {
		body := op + "-" + string(rune('a'+i))
		if n := post(op, body); n != 1 {
			t.Fatalf("POST /%s reached %d connections, want 1", op, n)
		}
		want = append(want, msg{op, body})
	}
	expectMessages(first, want)

	// A new /connect replaces the old one: the old stream ends with a reason.
	second := h.openSSE("/c/provider/connect?heartbeatMs=100")
	if ev, err := second.next(); err != nil || ev.name != "open" {
		t.Fatalf("second /connect: %v %v", ev, err)
	}
	for {
		ev, err := first.next()
		if err != nil {
			t.Fatalf("old stream ended without an end event: %v", err)
		}
		if ev.comment == "heartbeat" {
			continue
		}
		if ev.name != "end" || !strings.HasPrefix(ev.data, "closed: replaced by a newer /connect") {
			t.Fatalf("old stream: %+v, want event end with the replacement reason", ev)
		}
		break
	}
	if _, err := first.next(); err == nil {
		t.Fatal("old stream still open after its end event")
	}
	// Wait until the replacement is subscribed (the old one has unsubscribed by now).
	for post("dispatch", "probe-"+time.Now().String()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	for {
		ev, err := second.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.name == "message" {
			break
		}
	}
	if n := post("chunk", "to the new connection"); n != 1 {
		t.Fatalf("chunk reached %d, want 1", n)
	}
	expectMessages(second, []msg{{"chunk", "to the new connection"}})
}

// Done-means 9: a sidecar restart makes pending waits fail fast with REGISTRY_RESTARTED,
// and later waits on the old handles too; none hangs.
func TestSidecarRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		graceful bool
	}{{"crash (connections cut)", false}, {"graceful shutdown", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			hd := h.subscribe("restart", "room")
			pending := make(chan result, 1)
			go func() { pending <- h.do("restart", "wait", map[string]any{"handle": hd, "timeoutMs": 60000}) }()
			for h.srv.Channels().PendingWaits() == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			h.stopSidecar(tc.graceful)
			h.startSidecar()
			r := <-pending // the harness client's timeout guards against a hang
			if r.errCode() != "REGISTRY_RESTARTED" || !strings.Contains(r["error"].(map[string]any)["message"].(string), "channel registry restarted") {
				t.Fatalf("pending wait across the restart: %v, want REGISTRY_RESTARTED \"channel registry restarted\"", r)
			}
			t.Logf("pending wait answered: %v", r["error"])
			r = h.do("restart", "wait", map[string]any{"handle": hd, "timeoutMs": 60000})
			if r.errCode() != "REGISTRY_RESTARTED" {
				t.Fatalf("next wait on the old handle: %v, want REGISTRY_RESTARTED", r)
			}
			// The new registry works.
			h.subscribe("restart", "room")
		})
	}
}
