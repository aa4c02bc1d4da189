package channels_test

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Done-means 1: subscribe in one request, publish from another; every subscriber gets every
// message in order; each publisher's order is kept; 10,000 messages through one subscription.
func TestOrderedDelivery(t *testing.T) {
	h := newHarness(t, 0)
	cases := []struct {
		name        string
		subscribers int
		publishers  []string // message prefixes, one publisher request each
		perPub      int
	}{
		{"three subscribers x 100 messages", 3, []string{"m"}, 100},
		{"two publishers keep their order", 2, []string{"a", "b"}, 100},
		{"10,000 messages through one subscription", 1, []string{"x"}, 10000},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			object, channel := fmt.Sprintf("ordered-%d", i), "room"
			handles := make([]string, tc.subscribers)
			for s := range handles {
				handles[s] = h.subscribe(object, channel)
			}
			total := tc.perPub * len(tc.publishers)
			got := make([][]string, tc.subscribers)
			var fs []func()
			for s, hd := range handles {
				fs = append(fs, func() {
					r := h.ok(object, "collect", map[string]any{"handle": hd, "count": total, "timeoutMs": 30000})
					got[s] = r.strs("messages")
				})
			}
			for _, p := range tc.publishers {
				fs = append(fs, func() {
					r := h.ok(object, "publishMany", map[string]any{"channel": channel, "prefix": p, "count": tc.perPub})
					for _, n := range r["reached"].([]any) {
						if int(n.(float64)) != tc.subscribers {
							t.Errorf("publish reached %v subscribers, want %d", n, tc.subscribers)
							return
						}
					}
				})
			}
			parallel(fs...)
			for s := range got {
				if len(got[s]) != total {
					t.Fatalf("subscriber %d got %d messages, want %d", s, len(got[s]), total)
				}
				for _, p := range tc.publishers {
					var mine []string
					for _, m := range got[s] {
						if strings.HasPrefix(m, p) {
							mine = append(mine, m)
						}
					}
					if !slices.Equal(mine, seq(p, tc.perPub)) {
						t.Fatalf("subscriber %d: publisher %q's messages out of order or missing (first %v)", s, p, mine[:min(5, len(mine))])
					}
				}
			}
			for _, hd := range handles {
				h.ok(object, "unsubscribe", map[string]any{"handle": hd})
			}
		})
	}
}

// Done-means 2: a wait with nothing published times out; a timed-out wait loses nothing;
// timeoutMs 0 polls. (The 290..700 ms precision is measured by BenchmarkWaitTimeoutPrecision.)
func TestWaitTimeout(t *testing.T) {
	h := newHarness(t, 0)
	hd := h.subscribe("timeout", "room")
	r := h.ok("timeout", "wait", map[string]any{"handle": hd, "timeoutMs": 300})
	if r.str("outcome") != "timeout" {
		t.Fatalf("300 ms wait with nothing published: %v, want outcome timeout", r)
	}
	t.Logf("300 ms wait returned timeout after %d ms (measured in the Durable Object)", r.num("elapsedMs"))

	if r := h.ok("timeout", "wait", map[string]any{"handle": hd, "timeoutMs": 0}); r.str("outcome") != "timeout" {
		t.Fatalf("timeoutMs 0 with nothing queued: %v, want timeout", r)
	}
	h.ok("timeout", "publish", map[string]any{"channel": "room", "message": "after the timeout"})
	if r := h.ok("timeout", "wait", map[string]any{"handle": hd, "timeoutMs": 0}); r.str("outcome") != "message" || r.str("message") != "after the timeout" {
		t.Fatalf("timeoutMs 0 with one queued: %v, want the message", r)
	}

	// 1 ms waits racing a slower publisher (one request per message): every message
	// arrives, in order, none twice, however many waits timed out in between.
	const n = 100
	var r2 result
	parallel(func() {
		r2 = h.ok("timeout", "collectThroughTimeouts", map[string]any{"handle": hd, "count": n, "timeoutMs": 1})
	}, func() {
		for i := 0; i < n; i++ {
			h.ok("timeout", "publish", map[string]any{"channel": "room", "message": "r" + strconv.Itoa(i)})
		}
	})
	got, timeouts := r2.strs("messages"), r2.num("timeouts")
	if r2["end"] != nil || !slices.Equal(got, seq("r", n)) {
		t.Fatalf("messages across %d timed-out waits: got %d (%v), first %v", timeouts, len(got), r2["end"], got[:min(5, len(got))])
	}
	if timeouts == 0 {
		t.Log("note: no wait timed out in between (the publisher was faster than the waits)")
	}
	t.Logf("%d messages received intact across %d timed-out 1 ms waits", n, timeouts)
}

// Done-means 3: close lets subscribers drain, then they see closed with the reason.
func TestCloseDrainsThenClosed(t *testing.T) {
	h := newHarness(t, 0)
	a, b := h.subscribe("close", "room"), h.subscribe("close", "room")
	h.ok("close", "publishMany", map[string]any{"channel": "room", "prefix": "q", "count": 5})
	if r := h.ok("close", "close", map[string]any{"channel": "room", "reason": "shift over"}); r.num("notified") != 2 {
		t.Fatalf("close notified %v, want 2", r)
	}
	if r := h.ok("close", "count", map[string]any{"channel": "room"}); r.num("subscribers") != 0 {
		t.Fatalf("subscribers after close: %v, want 0", r)
	}
	for _, hd := range []string{a, b} {
		r := h.ok("close", "collect", map[string]any{"handle": hd, "count": 100, "timeoutMs": 5000})
		if !slices.Equal(r.strs("messages"), seq("q", 5)) {
			t.Fatalf("drained %v, want q0..q4", r["messages"])
		}
		end, _ := r["end"].(map[string]any)
		if end["outcome"] != "closed" || end["reason"] != "shift over" {
			t.Fatalf("after the drain: %v, want closed with reason %q", end, "shift over")
		}
	}
	// The name is free again.
	h.subscribe("close", "room")
}

// Done-means 4: unsubscribe drops the count; never-issued and foreign handles are rejected
// catchably with clear codes; a handle used after unsubscribe is SUBSCRIPTION_GONE.
func TestUnsubscribeAndHandles(t *testing.T) {
	h := newHarness(t, 0)
	a := h.subscribe("owner", "room")
	h.subscribe("owner", "room")
	if r := h.ok("owner", "count", map[string]any{"channel": "room"}); r.num("subscribers") != 2 {
		t.Fatalf("count %v, want 2", r)
	}
	if r := h.ok("owner", "unsubscribe", map[string]any{"handle": a}); r["unsubscribed"] != true {
		t.Fatalf("unsubscribe: %v", r)
	}
	if r := h.ok("owner", "count", map[string]any{"channel": "room"}); r.num("subscribers") != 1 {
		t.Fatalf("count after unsubscribe %v, want 1", r)
	}
	// Registries are per object instance: the same channel name in another object is
	// another channel.
	if r := h.ok("stranger", "publish", map[string]any{"channel": "room", "message": "elsewhere"}); r.num("reached") != 0 {
		t.Fatalf("publish in another object reached %v, want 0", r["reached"])
	}
	token, rest, _ := strings.Cut(a, ":")
	boot, _, _ := strings.Cut(rest, "-")
	cases := []struct {
		name, object, handle, code string
	}{
		{"malformed, never issued", "owner", "not-a-handle", "UNKNOWN_HANDLE"},
		{"well-formed, never issued", "owner", token + ":" + boot + "-999999", "UNKNOWN_HANDLE"},
		{"invented token", "owner", "0123456789abc:" + boot + "-1", "UNKNOWN_HANDLE"},
		{"issued to another object instance", "stranger", a, "FOREIGN_HANDLE"},
		{"unsubscribed", "owner", a, "SUBSCRIPTION_GONE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(tc.object, "wait", map[string]any{"handle": tc.handle, "timeoutMs": 0})
			e, _ := r["error"].(map[string]any)
			if r.errCode() != tc.code || e["isError"] != true || e["name"] != "ChannelError" {
				t.Fatalf("wait(%q) in %s: %v, want a caught ChannelError with code %s", tc.handle, tc.object, r, tc.code)
			}
			if !strings.Contains(e["message"].(string), tc.handle) {
				t.Fatalf("error message %q does not name the handle", e["message"])
			}
		})
	}
	// Outside a Durable Object the client refuses, catchably.
	res, err := h.client.Get(h.base + "/outside")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]result
	if err := jsonDecode(res.Body, &out); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"open", "subscribe"} {
		if out[k].errCode() != "NOT_DURABLE_OBJECT" {
			t.Fatalf("%s outside a Durable Object: %v, want NOT_DURABLE_OBJECT", k, out[k])
		}
	}
}

// Done-means 5: limits are catchable errors with stable codes; empty and 64 KiB messages
// are delivered; a never-reading subscriber is disconnected at the backlog limit with the
// exact reason while the others receive every message.
func TestLimits(t *testing.T) {
	spec := readSpec(t)
	h := newHarness(t, 0)

	t.Run("subscriber limit", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := 0; i < spec.subscribers; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); h.subscribe("subs", "crowded") }()
		}
		wg.Wait()
		r := h.do("subs", "subscribe", map[string]any{"channel": "crowded"})
		if r.errCode() != "SUBSCRIBER_LIMIT" {
			t.Fatalf("subscriber %d: %v, want SUBSCRIBER_LIMIT", spec.subscribers+1, r)
		}
		if e := r["error"].(map[string]any); int(e["limit"].(float64)) != spec.subscribers {
			t.Fatalf("limit in error %v, want %d", e["limit"], spec.subscribers)
		}
	})
	t.Run("channel limit", func(t *testing.T) {
		for i := 0; i < spec.channels; i++ {
			h.subscribe("chans", "c"+strconv.Itoa(i))
		}
		r := h.do("chans", "subscribe", map[string]any{"channel": "one-too-many"})
		if r.errCode() != "CHANNEL_LIMIT" {
			t.Fatalf("channel %d: %v, want CHANNEL_LIMIT", spec.channels+1, r)
		}
		// An existing channel still takes subscribers.
		h.subscribe("chans", "c0")
	})
	t.Run("message sizes", func(t *testing.T) {
		hd := h.subscribe("sizes", "room")
		cases := []struct {
			name, message, code string
		}{
			{"empty", "", ""},
			{"exactly the limit", strings.Repeat("é", spec.messageBytes/2), ""},
			{"one byte over", strings.Repeat("a", spec.messageBytes+1), "MESSAGE_TOO_LARGE"},
		}
		for _, tc := range cases {
			r := h.do("sizes", "publish", map[string]any{"channel": "room", "message": tc.message})
			if r.errCode() != tc.code {
				t.Fatalf("%s (%d bytes): %v, want code %q", tc.name, len(tc.message), r, tc.code)
			}
			if tc.code != "" {
				continue
			}
			w := h.ok("sizes", "wait", map[string]any{"handle": hd, "timeoutMs": 1000})
			if _, has := w["message"]; w.str("outcome") != "message" || !has || w.str("message") != tc.message {
				t.Fatalf("%s: delivered %q (%d bytes), want the %d-byte message", tc.name, w.str("outcome"), len(w.str("message")), len(tc.message))
			}
		}
	})
	t.Run("backlog disconnect", func(t *testing.T) {
		idle, reader := h.subscribe("backlog", "room"), h.subscribe("backlog", "room")
		msg := strings.Repeat("z", spec.messageBytes)
		fits := spec.backlogBytes / spec.messageBytes
		for i := 0; i < fits+4; i++ {
			r := h.ok("backlog", "publish", map[string]any{"channel": "room", "message": msg})
			want := 2
			if i >= fits {
				want = 1
			}
			if r.num("reached") != want {
				t.Fatalf("publish %d of %d bytes: reached %v, want %d", i+1, len(msg), r["reached"], want)
			}
			w := h.ok("backlog", "wait", map[string]any{"handle": reader, "timeoutMs": 1000})
			if w.str("message") != msg {
				t.Fatalf("the reading subscriber missed message %d: %v", i+1, w["outcome"])
			}
		}
		r := h.ok("backlog", "wait", map[string]any{"handle": idle, "timeoutMs": 0})
		if r.str("outcome") != "disconnected" || r.str("reason") != spec.backlogReason {
			t.Fatalf("never-reading subscriber: %v, want disconnected with reason %q", r, spec.backlogReason)
		}
		if c := h.ok("backlog", "count", map[string]any{"channel": "room"}); c.num("subscribers") != 1 {
			t.Fatalf("count after the disconnect: %v, want 1", c)
		}
	})
}

// Done-means 6: 64 requests subscribe to 64 channels and return without unsubscribing;
// after the lease, a subscribe to a 65th channel succeeds (the seed's host leaked).
func TestLeaseCollectsLeakedSubscriptions(t *testing.T) {
	spec := readSpec(t)
	const lease = 500 * time.Millisecond
	h := newHarness(t, lease)
	var wg sync.WaitGroup
	for i := 0; i < spec.channels; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); h.subscribe("leak", "c"+strconv.Itoa(i)) }()
	}
	wg.Wait()
	time.Sleep(lease + lease/2) // let the leases lapse (not a timed assertion)
	h.subscribe("leak", "the-65th")
	if r := h.ok("leak", "count", map[string]any{"channel": "c0"}); r.num("subscribers") != 0 {
		t.Fatalf("leaked subscription still counted: %v", r)
	}
}

// Done-means 7: subscribe, then read state, then wait: every message published after the
// subscribe is seen exactly once (the snapshot/wait overlap is deduplicated).
func TestSubscribeReadWaitExactlyOnce(t *testing.T) {
	h := newHarness(t, 0)
	const before, after = 50, 150
	h.ok("snap", "produce", map[string]any{"channel": "items", "from": 1, "count": before})
	var r result
	parallel(func() {
		r = h.ok("snap", "snapshotThenWait", map[string]any{"channel": "items", "total": before + after, "timeoutMs": 10000})
	}, func() {
		// Start producing once the subscriber is subscribed.
		for h.ok("snap", "count", map[string]any{"channel": "items"}).num("subscribers") == 0 {
			time.Sleep(time.Millisecond)
		}
		h.ok("snap", "produce", map[string]any{"channel": "items", "from": before + 1, "count": after})
	})
	if r["end"] != nil {
		t.Fatalf("subscriber ended early: %v", r["end"])
	}
	snapshot, received := r.strs("snapshot"), r.strs("received")
	seen := map[string]int{}
	for _, m := range received {
		seen[m]++
	}
	for m, n := range seen {
		if n != 1 {
			t.Fatalf("message %s delivered %d times", m, n)
		}
	}
	union := map[string]bool{}
	for _, m := range append(snapshot, received...) {
		union[m] = true
	}
	var all []int
	for m := range union {
		v, _ := strconv.Atoi(m)
		all = append(all, v)
	}
	sort.Ints(all)
	if len(all) != before+after || all[0] != 1 || all[len(all)-1] != before+after {
		t.Fatalf("snapshot ∪ received has %d items (%v..), want 1..%d", len(all), all[:min(3, len(all))], before+after)
	}
	// Every item produced after the subscribe arrived through wait.
	for i := before + 1; i <= before+after; i++ {
		if seen[strconv.Itoa(i)] != 1 {
			t.Fatalf("item %d (published after the subscribe) was not received by wait", i)
		}
	}
	t.Logf("snapshot %d items, received %d, %d in both (deduplicated)", len(snapshot), len(received), r.num("deduped"))
}
