package channels_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
)

// streamsClient is one streams request (docs/channels.md "Many streams on one request"):
// send writes command lines, next reads the next answer line.
type streamsClient struct {
	t     *testing.T
	w     io.WriteCloser
	lines *bufio.Scanner
}

func openStreams(t *testing.T, base string) *streamsClient {
	w, res := openDuplex(t, base+"streams")
	return &streamsClient{t: t, w: w, lines: bufio.NewScanner(res.Body)}
}

// openDuplex posts a request whose body stays open to write to (a streams request or a
// pipeline); both are closed when the test ends.
func openDuplex(t *testing.T, url string) (io.WriteCloser, *http.Response) {
	pr, pw := io.Pipe()
	res, err := http.Post(url, "application/x-ndjson", pr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.Close(); res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d", url, res.StatusCode)
	}
	return pw, res
}

func (s *streamsClient) send(line string) {
	if _, err := io.WriteString(s.w, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// streamsLine is one answer line: a stream line tagged with its handle.
type streamsLine struct {
	Handle   string
	Outcome  string
	Messages []string
	Seq      uint64
	Reason   string
	Stopped  bool
	Error    *struct {
		Code  string
		Limit int64
	}
}

func (s *streamsClient) next() streamsLine {
	s.t.Helper()
	if !s.lines.Scan() {
		s.t.Fatalf("the streams answer ended: %v", s.lines.Err())
	}
	var l streamsLine
	if err := json.Unmarshal(s.lines.Bytes(), &l); err != nil {
		s.t.Fatalf("line %s: %v", s.lines.Bytes(), err)
	}
	return l
}

// The streams route carries the stream route's lines of many handles on one request, each
// tagged with its handle: a first line at once, a line per publish to each handle, stop
// leaving what is published later queued for a wait, a second start of a running handle
// and an unknown handle answered with their errors, and closed at the end.
func TestStreamsRoute(t *testing.T) {
	h := newHarnessSidecarOnly(t)
	base := "http://" + h.sidecarAddr + "/channels/v1/objects/ns/obj/"
	call := func(op, body string) map[string]any {
		res, err := http.Post(base+op, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return out
	}
	h1 := call("subscribe", `{"channel":"room"}`)["handle"].(string)
	h2 := call("subscribe", `{"channel":"room"}`)["handle"].(string)
	s := openStreams(t, base)
	s.send(`{"handle":"` + h1 + `","timeoutMs":60000}`)
	s.send(`{"handle":"` + h2 + `","timeoutMs":60000}`)
	first := map[string]string{}
	for range 2 {
		l := s.next()
		first[l.Handle] = l.Outcome
	}
	if first[h1] != "timeout" || first[h2] != "timeout" {
		t.Fatalf("first lines %v, want a timeout line for each handle", first)
	}
	if n := call("publish", `{"channel":"room","message":"a"}`)["reached"]; n != 2.0 {
		t.Fatalf("publish reached %v, want 2", n)
	}
	got := map[string]streamsLine{}
	for range 2 {
		l := s.next()
		got[l.Handle] = l
	}
	for _, hd := range []string{h1, h2} {
		if l := got[hd]; l.Outcome != "messages" || len(l.Messages) != 1 || l.Messages[0] != "a" || l.Seq != 0 {
			t.Fatalf("line for %s: %+v, want messages [a] from seq 0", hd, l)
		}
	}

	s.send(`{"handle":"` + h2 + `","timeoutMs":60000}`)
	if l := s.next(); l.Handle != h2 || l.Error == nil || l.Error.Code != "INVALID_ARGUMENT" {
		t.Fatalf("second start of a running handle: %+v, want INVALID_ARGUMENT for it", l)
	}
	s.send(`{"handle":"nope:1","timeoutMs":60000}`)
	if l := s.next(); l.Handle != "nope:1" || l.Error == nil || l.Error.Code != "UNKNOWN_HANDLE" {
		t.Fatalf("unknown handle: %+v, want UNKNOWN_HANDLE for it", l)
	}
	s.send(`{"handle":"` + h1 + `","stop":true}`)
	s.send(`{}`)  // answered once the stop before it was applied
	for range 2 { // the stop's answer comes from h1's stream, so in either order
		switch l := s.next(); {
		case l.Handle == h1 && l.Stopped:
		case l.Handle == "" && l.Error != nil && l.Error.Code == "INVALID_ARGUMENT":
		default:
			t.Fatalf("after the stop and a bad command: %+v, want stopped for %s and INVALID_ARGUMENT", l, h1)
		}
	}
	s.send(`{"handle":"` + h1 + `","stop":true}`) // not streaming: answered at once
	if l := s.next(); l.Handle != h1 || !l.Stopped {
		t.Fatalf("stop of a handle not streaming: %+v, want stopped", l)
	}
	call("publish", `{"channel":"room","message":"b"}`)
	if l := s.next(); l.Handle != h2 || len(l.Messages) != 1 || l.Messages[0] != "b" || l.Seq != 1 {
		t.Fatalf("after the stop: %+v, want only %s's line [b] from seq 1", l, h2)
	}
	if w := call("wait", `{"handle":"`+h1+`","timeoutMs":0}`); w["outcome"] != "message" || w["message"] != "b" {
		t.Fatalf("wait on the stopped handle: %v, want b still queued", w)
	}
	call("close", `{"channel":"room","reason":"bye"}`)
	if l := s.next(); l.Handle != h2 || l.Outcome != "closed" || l.Reason != "bye" {
		t.Fatalf("last line %+v, want closed bye for %s", l, h2)
	}
}

// ch.messages loops of one object share one streams request: a subscriber that leaves
// does not end another's loop, a sidecar restart ends every loop with REGISTRY_RESTARTED,
// and the next loop (and publish) of the object opens a new request to the new sidecar.
func TestMessagesShareOneRequest(t *testing.T) {
	h := newHarness(t, 0)
	a := h.openSSE("/o/share/stream?channel=c&iterate")
	b := h.openSSE("/o/share/stream?channel=c&iterate")
	for _, s := range []*sse{a, b} {
		if ev, err := s.next(); err != nil || ev.comment != "subscribed" {
			t.Fatalf("first event %+v, %v; want the subscribed comment", ev, err)
		}
	}
	a.res.Body.Close()
	h.ok("share", "publishMany", map[string]any{"channel": "c", "prefix": "m", "count": 5})
	var got []string
	for len(got) < 5 {
		ev, err := b.next()
		if err != nil || ev.name == "end" {
			t.Fatalf("the remaining loop ended after %v: %+v %v", got, ev, err)
		}
		if ev.comment == "" {
			got = append(got, ev.data)
		}
	}
	if want := seq("m", 5); !reflect.DeepEqual(got, want) {
		t.Fatalf("remaining loop got %v, want %v", got, want)
	}

	h.stopSidecar(false)
	h.startSidecar()
	for {
		ev, err := b.next()
		if err != nil {
			t.Fatalf("the loop's stream ended without its end event: %v", err)
		}
		if ev.name == "end" {
			if ev.data != "error: REGISTRY_RESTARTED" {
				t.Fatalf("end %q, want error: REGISTRY_RESTARTED", ev.data)
			}
			break
		}
	}
	c := h.openSSE("/o/share/stream?channel=c&iterate")
	if ev, err := c.next(); err != nil || ev.comment != "subscribed" {
		t.Fatalf("first event after the restart %+v, %v", ev, err)
	}
	if r := h.ok("share", "publish", map[string]any{"channel": "c", "message": "after"}); r.num("reached") != 1 {
		t.Fatalf("publish after the restart: %v, want reached 1", r)
	}
	for {
		ev, err := c.next()
		if err != nil {
			t.Fatalf("new loop: %v", err)
		}
		if ev.comment == "" {
			if ev.data != "after" {
				t.Fatalf("new loop got %q, want after", ev.data)
			}
			break
		}
	}
}

// A streams request streams at most MaxStreamsPerRequest handles and the sidecar
// MaxStreams over all of them (docs/channels.md "Many streams on one request"): the start
// past either is answered STREAM_LIMIT, naming the limit, for that handle alone.
func TestStreamsLimits(t *testing.T) {
	h := newHarnessSidecarOnly(t)
	base := "http://" + h.sidecarAddr + "/channels/v1/objects/ns/many/"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	subscribe := func(i int) string {
		res, err := client.Post(base+"subscribe", "application/json", strings.NewReader(fmt.Sprintf(`{"channel":"c%d"}`, i/256)))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r struct{ Handle string }
		_ = json.NewDecoder(res.Body).Decode(&r)
		return r.Handle
	}
	// start sends n starts of new subscriptions on s and returns the first line of each.
	subscribed := 0
	start := func(s *streamsClient, n int) map[string]streamsLine {
		var cmds strings.Builder
		for ; n > 0; n-- {
			cmds.WriteString(`{"handle":"` + subscribe(subscribed) + `","timeoutMs":60000}` + "\n")
			subscribed++
		}
		s.send(strings.TrimSuffix(cmds.String(), "\n"))
		lines := map[string]streamsLine{}
		for len(lines) < strings.Count(cmds.String(), "\n") {
			l := s.next()
			lines[l.Handle] = l
		}
		return lines
	}
	limited := func(lines map[string]streamsLine, want int64) int {
		n := 0
		for _, l := range lines {
			if l.Error != nil {
				if l.Error.Code != "STREAM_LIMIT" || l.Error.Limit != want {
					t.Fatalf("error line %+v, want STREAM_LIMIT with limit %d", l.Error, want)
				}
				n++
			}
		}
		return n
	}
	if n := limited(start(openStreams(t, base), channels.MaxStreamsPerRequest+1), channels.MaxStreamsPerRequest); n != 1 {
		t.Fatalf("%d starts refused on one request, want 1 (the one past %d)", n, channels.MaxStreamsPerRequest)
	}
	for i := 1; i < channels.MaxStreams/channels.MaxStreamsPerRequest; i++ {
		if n := limited(start(openStreams(t, base), channels.MaxStreamsPerRequest), channels.MaxStreams); n != 0 {
			t.Fatalf("request %d: %d starts refused below the sidecar's limit", i+1, n)
		}
	}
	if n := limited(start(openStreams(t, base), 1), channels.MaxStreams); n != 1 {
		t.Fatalf("start past the sidecar's %d: not refused", channels.MaxStreams)
	}
}

// Leaving a messages() loop early keeps every line the sidecar already sent for the
// handle (docs/channels.md "Batched wait and stream"): the sidecar acknowledged them when
// they were written, so lines the loop had received but not yet taken are answered by the
// next wait, not lost.
func TestMessagesLeftEarlyKeepsReceivedLines(t *testing.T) {
	h := newHarness(t, 0)
	r := h.ok("early", "leaveEarly", map[string]any{"channel": "c", "count": 5, "settleMs": 300})
	if first, _ := r["first"].(map[string]any); first["outcome"] != "timeout" {
		t.Fatalf("first outcome %v, want the stream's first heartbeat", r["first"])
	}
	if taken, _ := r["taken"].(map[string]any); taken["message"] != "m0" {
		t.Fatalf("taken %v, want m0", r["taken"])
	}
	if got, want := r.strs("rest"), seq("m", 5)[1:]; !reflect.DeepEqual(got, want) {
		t.Fatalf("wait after leaving the loop got %v, want %v", got, want)
	}
}

// A handle's messages() loops that leave and start again while messages are published
// (stop and start of the same handle on the streams request, with lines in flight) get
// every message once, in order.
func TestMessagesRestartedLoopsExactlyOnce(t *testing.T) {
	h := newHarness(t, 0)
	r := h.ok("restart", "restartLoops", map[string]any{"channel": "c", "count": 400, "every": 3, "heartbeatMs": 500})
	if got, want := r.strs("got"), seq("m", 400); !reflect.DeepEqual(got, want) {
		t.Fatalf("after %v loops got %d messages %v, want %v", r["loops"], len(got), got, want)
	}
}

// A messages() loop that does not keep up is a slow subscriber like a wait loop that
// does not wait (docs/channels.md "Backlog"): once more than the backlog limit is
// published to it unread, it is disconnected with the backlog reason, rather than the
// client holding every line of the shared streams request in the isolate's memory.
func TestMessagesSlowLoopDisconnected(t *testing.T) {
	h := newHarness(t, 0)
	spec := readSpec(t)
	count := 4 * spec.backlogBytes / (64 << 10)
	r := h.ok("slow", "slowLoop", map[string]any{"channel": "c", "count": count, "size": 64 << 10, "settleMs": 300})
	end, _ := r["end"].(map[string]any)
	if end["outcome"] != "disconnected" || end["reason"] != spec.backlogReason || r.num("messages") >= count {
		t.Fatalf("slow loop: %d of %d messages then %v, want fewer, then disconnected %q", r.num("messages"), count, end, spec.backlogReason)
	}
	// Paused past the backlog limit but under twice it: resumed, every message once.
	count = 3 * spec.backlogBytes / 2 / (64 << 10)
	r = h.ok("slow2", "slowLoop", map[string]any{"channel": "c", "count": count, "size": 64 << 10, "settleMs": 300})
	if end, _ := r["end"].(map[string]any); end["outcome"] != "timeout" || r.num("messages") != count {
		t.Fatalf("paused loop: %d of %d messages then %v, want all, then a heartbeat", r.num("messages"), count, end)
	}
}

// A command line over the request body limit ends the streams request with an error line
// saying so, rather than silently (the caller would take it for a lost sidecar).
func TestStreamsCommandTooLong(t *testing.T) {
	h := newHarnessSidecarOnly(t)
	s := openStreams(t, "http://"+h.sidecarAddr+"/channels/v1/objects/ns/obj/")
	// The sidecar may answer and end the request before it has read the whole line: the
	// transport then closes the body being written, which is not the failure under test.
	if _, err := io.WriteString(s.w, `{"handle":"`+strings.Repeat("x", 500<<10)+`"}`+"\n"); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatal(err)
	}
	if l := s.next(); l.Handle != "" || l.Error == nil || l.Error.Code != "INVALID_ARGUMENT" || l.Error.Limit == 0 {
		t.Fatalf("line %+v, want INVALID_ARGUMENT naming the limit", l)
	}
}

// A streams request does not keep the memory of its largest lines: after every handle of
// a request got a batch of about the backlog limit (1 MiB), the sidecar's heap is back
// near where it was, rather than holding a copy or two of each handle's line for as long
// as it streams (4,096 handles per sidecar would hold gigabytes).
func TestStreamsDropLargeLineBuffers(t *testing.T) {
	h := newHarnessSidecarOnly(t)
	base := "http://" + h.sidecarAddr + "/channels/v1/objects/ns/mem/"
	post := func(op, body string) string {
		res, err := http.Post(base+op, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	const handles = 64
	var starts strings.Builder
	for range handles {
		var sub struct{ Handle string }
		_ = json.Unmarshal([]byte(post("subscribe", `{"channel":"c"}`)), &sub)
		starts.WriteString(`{"handle":"` + sub.Handle + `","timeoutMs":60000}` + "\n")
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for range 15 { // under the backlog limit: one line of 15 × 64 KiB per handle
		post("publish", `{"channel":"c","message":"`+strings.Repeat("x", 64<<10)+`"}`)
	}
	pw, res := openDuplex(t, base+"streams")
	go func() { _, _ = io.WriteString(pw, starts.String()) }()
	lines := bufio.NewReader(res.Body)
	readLines := func(n int) {
		for range n {
			if _, err := lines.ReadBytes('\n'); err != nil {
				t.Fatal(err)
			}
		}
	}
	readLines(handles)
	post("publish", `{"channel":"c","message":"small"}`) // every stream went round once more
	readLines(handles)
	if grown := int64(heap()) - int64(before); grown > 16<<20 {
		t.Fatalf("the sidecar's heap grew by %d MiB streaming %d handles, want under 16 MiB", grown>>20, handles)
	}
}

// A graceful stop of the sidecar ends its streams and pipeline requests though their
// callers keep their bodies open (docs/channels.md "Restart": pending waits are answered
// REGISTRY_RESTARTED, then open requests drain): the stop does not wait out its timeout.
func TestDuplexRequestsEndOnShutdown(t *testing.T) {
	h := newHarnessSidecarOnly(t)
	base := "http://" + h.sidecarAddr + "/channels/v1/objects/ns/obj/"
	res, err := http.Post(base+"subscribe", "application/json", strings.NewReader(`{"channel":"c"}`))
	if err != nil {
		t.Fatal(err)
	}
	var sub struct{ Handle string }
	_ = json.NewDecoder(res.Body).Decode(&sub)
	res.Body.Close()
	s := openStreams(t, base)
	s.send(`{"handle":"` + sub.Handle + `","timeoutMs":60000}`)
	if l := s.next(); l.Outcome != "timeout" {
		t.Fatalf("first line %+v, want a heartbeat", l)
	}
	openDuplex(t, base+"pipeline")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a streams request and a pipeline open: %v, want them ended", err)
	}
	h.srv = nil
	if l := s.next(); l.Error == nil || l.Error.Code != "REGISTRY_RESTARTED" {
		t.Fatalf("streams line %+v, want REGISTRY_RESTARTED", l)
	}
}
