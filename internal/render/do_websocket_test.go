package render_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// dialRoom opens a WebSocket to room on replica or shard p (testenv.DialRoom).
func dialRoom(t testing.TB, p *proc, room, user, mode string) *websocket.Conn {
	t.Helper()
	return testenv.DialRoom(t, p.addr(podcontract.HTTPSocket), room, user, mode)
}

// TestDurableObjectWebSockets: WebSockets to Durable Objects on both shards, through
// either Worker replica, its router, the owning shard's gateway, to the object
// (docs/durable-objects.md "WebSockets"). Real workerd processes on the rendered configs.
func TestDurableObjectWebSockets(t *testing.T) {
	w, d := fixture(t, "wsroom")
	c := startDOClusterFor(t, w, d, 2)
	t.Run("broadcast", func(t *testing.T) { wsBroadcast(t, c) })
	t.Run("plain accept", func(t *testing.T) {
		room, _ := nameOnShard(t, c, "plain", 1)
		ws := dialRoom(t, c.replicas[1], room, "ada", "plain")
		if got := testenv.RoundTrip(t, ws, "echo:hello"); got != "hello" {
			t.Errorf("echo = %q, want hello", got)
		}
	})
	t.Run("hibernation", func(t *testing.T) { wsHibernation(t, c) })
	t.Run("limits", func(t *testing.T) { wsLimits(t, c) })
	t.Run("close", func(t *testing.T) { wsClose(t, c) })
	t.Run("connect", func(t *testing.T) { wsConnect(t, c) })
	t.Run("console", func(t *testing.T) { wsConsole(t, c) })
	t.Run("drain", func(t *testing.T) { wsDrain(t, c) })
}

// wsConsole: console.log in a hibernatable socket's webSocketMessage and webSocketClose
// handlers and in a plain socket's message listener each reach the shard's sidecar as a
// JSON log line, as every other console call does (docs/observability.md).
func wsConsole(t *testing.T, c *doCluster) {
	const shard = 0
	room, _ := nameOnShard(t, c, "console", shard)
	hib := dialRoom(t, c.replicas[0], room, "ada", "")
	plain := dialRoom(t, c.replicas[1], room, "bob", "plain")
	for ws, say := range map[*websocket.Conn]string{hib: "log:from-hibernatable", plain: "log:from-plain"} {
		if got := testenv.RoundTrip(t, ws, say); got != "logged" {
			t.Fatalf("%s: %q, want logged", say, got)
		}
	}
	_ = hib.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "bye"))
	_ = hib.Close()
	want := []string{`"message":"ws log from-hibernatable"`, `"message":"ws log from-plain"`, `"message":"ws close 4001 bye"`}
	// A liveness wait, not a latency bound: on a loaded 2-core machine (make test beside
	// the real-node suite) the tail stream of a plain socket's request has taken more
	// than 60 s to deliver.
	deadline := time.Now().Add(150 * time.Second)
	for {
		logs, missing := c.logs[shard].String(), []string{}
		for _, w := range want {
			if !strings.Contains(logs, w) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard %d's sidecar logged no %v:\n%s", shard, missing, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wsBroadcast: 4 rooms (2 per shard), 10 hibernatable clients each, alternating
// replicas; every client broadcasts 3 messages. Every client receives each broadcast of
// its room exactly once, in the room's order (seq 1..30).
func wsBroadcast(t *testing.T, c *doCluster) {
	const rooms, clients, each = 4, 10, 3
	conns := make([][]*websocket.Conn, rooms)
	for r := range conns {
		room, _ := nameOnShard(t, c, fmt.Sprintf("bcast%d", r), int32(r%2))
		for i := 0; i < clients; i++ {
			ws := dialRoom(t, c.replicas[i%2], room, fmt.Sprintf("u%d", i), "")
			// An answer proves the object accepted the socket before anyone broadcasts.
			if got := testenv.RoundTrip(t, ws, "echo:ready"); got != "ready" {
				t.Fatalf("room %d client %d: %q", r, i, got)
			}
			conns[r] = append(conns[r], ws)
		}
	}
	testenv.CheckRoomBroadcasts(t, conns, each)
}

// wsHibernation: testenv.CheckRoomHibernation, the two sockets through different replicas.
func wsHibernation(t *testing.T, c *doCluster) {
	room, _ := nameOnShard(t, c, "hib", 1)
	testenv.CheckRoomHibernation(t, dialRoom(t, c.replicas[0], room, "ada", ""), dialRoom(t, c.replicas[1], room, "bob", ""))
}

// wsLimits: serializeAttachment refuses more than 16 KiB; a received message over
// 32 MiB closes the socket with 1009 (message too big).
// https://developers.cloudflare.com/durable-objects/platform/limits/
func wsLimits(t *testing.T, c *doCluster) {
	room, _ := nameOnShard(t, c, "limits", 1)
	ws := dialRoom(t, c.replicas[0], room, "ada", "")
	if got := testenv.RoundTrip(t, ws, "attach:16000"); got != "attached" {
		t.Errorf("a 16,000-byte attachment: %q, want attached", got)
	}
	if got := testenv.RoundTrip(t, ws, "attach:16400"); !strings.Contains(got, "cannot be larger than 16384 bytes") {
		t.Errorf("a 16,400-byte attachment: %q, want refused at 16384 bytes", got)
	}
	if got := testenv.RoundTrip(t, ws, "timeout:5000"); got != "5000" {
		t.Errorf("setHibernatableWebSocketEventTimeout(5000) then get: %q", got)
	}
	// The bounds workerd enforces, as the WebSocket API page states them.
	// https://developers.cloudflare.com/durable-objects/api/websockets/
	var bounds map[string]string
	if err := json.Unmarshal([]byte(testenv.RoundTrip(t, ws, "bounds")), &bounds); err != nil {
		t.Fatal(err)
	}
	for what, want := range map[string]string{
		"tags 10": "ok", "tags 11": "cannot have more than 10 tags",
		"tag chars 256": "ok", "tag chars 257": "longer than the max tag length (256 characters)",
		"auto-response bytes 2048": "ok", "auto-response bytes 2049": "cannot be larger than 2048 bytes",
		"event timeout ms 604800000": "ok", "event timeout ms 604800001": "should not exceed 604800000 ms",
	} {
		if got := bounds[what]; !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	big := make([]byte, 1<<20)
	if got := testenv.RoundTrip(t, ws, "echo:"+string(big)); len(got) != len(big) {
		t.Errorf("a 1 MiB echo came back with %d bytes", len(got))
	}
	_ = ws.WriteMessage(websocket.BinaryMessage, make([]byte, limits.Get(limits.Paid, limits.DOWebSocketMessageBytes)+1))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Errorf("after a message of 32 MiB + 1 byte: %v, want close 1009", err)
	}
}

// wsClose: a client's close code and reason reach the object's webSocketClose handler,
// and the object's reach the client.
func wsClose(t *testing.T, c *doCluster) {
	room, _ := nameOnShard(t, c, "closing", 0)
	ada := dialRoom(t, c.replicas[0], room, "ada", "")
	bob := dialRoom(t, c.replicas[1], room, "bob", "")
	testenv.RoundTrip(t, ada, "echo:x")
	_ = ada.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "bye"), time.Now().Add(5*time.Second))
	waitFor(t, "webSocketClose(4001, bye)", func() bool {
		return testenv.RoundTrip(t, bob, "lastclose") == `{"code":4001,"reason":"bye"}`
	})
	// And the other way: the object's close code and reason reach the client.
	_ = bob.WriteMessage(websocket.TextMessage, []byte("close:4002:done"))
	_ = bob.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _, err := bob.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4002 || ce.Text != "done" {
		t.Errorf("after the object closed the socket: %v, want close 4002 done", err)
	}
}

// wsDrain: draining a shard (its pod's preStop hook) closes every WebSocket it relays
// with 1012 (service restart) and a reason, at both ends: the clients and the object's
// webSocketClose. Clients reconnecting after the shard restarted find the room's stored
// state. https://www.rfc-editor.org/rfc/rfc6455 (1012: IANA WebSocket close code registry)
func wsDrain(t *testing.T, c *doCluster) {
	const s = 1
	room, _ := nameOnShard(t, c, "drain", s)
	clients := []*websocket.Conn{dialRoom(t, c.replicas[0], room, "ada", ""), dialRoom(t, c.replicas[1], room, "bob", "")}
	_ = clients[1].WriteMessage(websocket.TextMessage, []byte("bcast:before the drain"))
	for _, ws := range clients {
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, b, err := ws.ReadMessage(); err != nil || !strings.Contains(string(b), "before the drain") {
			t.Fatalf("broadcast: %s %v", b, err)
		}
	}
	resp, err := c.client.Get("http://" + c.target.ShardAddresses[s] + render.GatewayDrainPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for i, ws := range clients {
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, _, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseServiceRestart || !strings.Contains(ce.Text, "is being replaced; reconnect") {
			t.Errorf("client %d after the drain: %v, want close 1012 with a reason", i, err)
		}
	}
	c.shards[s].kill()
	c.shards[s].start()
	ws := dialRoom(t, c.replicas[0], room, "ada", "")
	if got := testenv.Info(t, ws); got.Seq != 1 {
		t.Errorf("after the restart the room's seq is %d, want 1 (stored before)", got.Seq)
	}
	if got := testenv.RoundTrip(t, ws, "lastclose"); !strings.Contains(got, `"code":1012`) {
		t.Errorf("the object's webSocketClose stored %s, want code 1012", got)
	}
}

// wsConnect: stub.connect() reaches the object's connect() handler on either shard,
// from a Worker replica (across pods, byte streams over JS RPC) and from shard 0's own
// Worker code (in-process for shard 0's objects).
func wsConnect(t *testing.T, c *doCluster) {
	for _, s := range []int32{0, 1} {
		room, _ := nameOnShard(t, c, "tcp", s)
		for _, p := range []*proc{c.replicas[0], c.shards[0]} {
			if got := c.mustGet(t, p, "/tcp", url.Values{"name": {room}, "say": {"hello"}}); got != room+":hello" {
				t.Errorf("shard %d room through connect(): %q, want %q", s, got, room+":hello")
			}
		}
	}
}
