package render_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// dialRoom opens a WebSocket to room on p's http socket.
func dialRoom(t testing.TB, p *proc, room, user, mode string) *websocket.Conn {
	t.Helper()
	q := url.Values{"user": {user}}
	if mode != "" {
		q.Set("mode", mode)
	}
	u := "ws://" + p.addr(podcontract.HTTPSocket) + "/room/" + url.PathEscape(room) + "?" + q.Encode()
	c, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		status := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			status = resp.Status + ": " + string(b)
		}
		t.Fatalf("dial %s: %v %s\n%s", u, err, status, p.output())
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func roundTrip(t testing.TB, c *websocket.Conn, msg string) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatalf("send %q: %v", msg, err)
	}
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("answer to %q: %v", msg, err)
	}
	return string(b)
}

type roomInfo struct {
	Constructions  int             `json:"constructions"`
	ConstructedAt  int64           `json:"constructedAt"`
	Attachment     json.RawMessage `json:"attachment"`
	Sockets        int             `json:"sockets"`
	Tagged         int             `json:"tagged"`
	AutoResponseAt *int64          `json:"autoResponseAt"`
	Seq            int             `json:"seq"`
}

func info(t testing.TB, c *websocket.Conn) roomInfo {
	t.Helper()
	var i roomInfo
	s := roundTrip(t, c, "info")
	if err := json.Unmarshal([]byte(s), &i); err != nil {
		t.Fatalf("info %q: %v", s, err)
	}
	return i
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
		if got := roundTrip(t, ws, "echo:hello"); got != "hello" {
			t.Errorf("echo = %q, want hello", got)
		}
	})
	t.Run("hibernation", func(t *testing.T) { wsHibernation(t, c) })
	t.Run("limits", func(t *testing.T) { wsLimits(t, c) })
	t.Run("close", func(t *testing.T) { wsClose(t, c) })
	t.Run("drain", func(t *testing.T) { wsDrain(t, c) })
}

// wsBroadcast: 4 rooms (2 per shard), 10 hibernatable clients each, alternating
// replicas; every client broadcasts 3 messages. Every client receives each broadcast of
// its room exactly once, in the room's order (seq 1..30).
func wsBroadcast(t *testing.T, c *doCluster) {
	const rooms, clients, each = 4, 10, 3
	var conns [rooms][clients]*websocket.Conn
	for r := 0; r < rooms; r++ {
		room, _ := nameOnShard(t, c, fmt.Sprintf("bcast%d", r), int32(r%2))
		for i := range conns[r] {
			conns[r][i] = dialRoom(t, c.replicas[i%2], room, fmt.Sprintf("u%d", i), "")
			// An answer proves the object accepted the socket before anyone broadcasts.
			if got := roundTrip(t, conns[r][i], "echo:ready"); got != "ready" {
				t.Fatalf("room %d client %d: %q", r, i, got)
			}
		}
	}
	for k := 0; k < each; k++ {
		for r := range conns {
			for i, ws := range conns[r] {
				if err := ws.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf("bcast:m%d-%d", i, k))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for r := range conns {
		for i, ws := range conns[r] {
			seen := map[string]int{}
			for n := 1; n <= clients*each; n++ {
				var m struct {
					Seq        int
					From, Text string
				}
				_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
				if err := ws.ReadJSON(&m); err != nil {
					t.Fatalf("room %d client %d, broadcast %d: %v", r, i, n, err)
				}
				if m.Seq != n {
					t.Fatalf("room %d client %d: broadcast seq %d, want %d (in order, once each)", r, i, m.Seq, n)
				}
				seen[m.From+" "+m.Text]++
			}
			for u := 0; u < clients; u++ {
				for k := 0; k < each; k++ {
					if key := fmt.Sprintf("u%d m%d-%d", u, u, k); seen[key] != 1 {
						t.Errorf("room %d client %d got %q %d times, want once", r, i, key, seen[key])
					}
				}
			}
		}
	}
}

// wsHibernation: an object holding two hibernatable sockets (one per replica) is evicted
// after 10 s without events (workerd's inactivity timeout) while both stay open: the
// next message runs a new instance (the stored construction count went up), which finds
// both sockets (getWebSockets, tags) and their attachments. A "ping" in between is
// answered "pong" by workerd (setWebSocketAutoResponse) without waking the object: the
// new instance was constructed after that pong arrived.
// https://developers.cloudflare.com/durable-objects/best-practices/websockets/#websocket-hibernation-api
func wsHibernation(t *testing.T, c *doCluster) {
	room, _ := nameOnShard(t, c, "hib", 1)
	ada := dialRoom(t, c.replicas[0], room, "ada", "")
	bob := dialRoom(t, c.replicas[1], room, "bob", "")
	before := info(t, ada)
	if before.Sockets != 2 || before.Tagged != 1 || before.AutoResponseAt != nil {
		t.Fatalf("before: %+v, want 2 sockets, 1 tagged user:ada, no auto-response yet", before)
	}
	var after roomInfo
	var pingSent, pongAt time.Time
	for try := 0; ; try++ {
		time.Sleep(11 * time.Second)
		pingSent = time.Now().Truncate(time.Millisecond)
		if got := roundTrip(t, ada, "ping"); got != "pong" {
			t.Fatalf("ping answered %q, want pong", got)
		}
		pongAt = time.Now()
		if after = info(t, ada); after.Constructions > before.Constructions || try == 5 {
			break
		}
	}
	if after.Constructions != before.Constructions+1 {
		t.Fatalf("constructions %d -> %d: the object was not evicted and rebuilt while its sockets stayed open", before.Constructions, after.Constructions)
	}
	if after.ConstructedAt < pongAt.UnixMilli() {
		t.Errorf("the object was constructed at %d, before the pong arrived (%d): the auto-response woke it", after.ConstructedAt, pongAt.UnixMilli())
	}
	if want := fmt.Sprintf(`{"user":"ada","joined":%d}`, before.Constructions); string(after.Attachment) != want {
		t.Errorf("attachment after hibernation %s, want %s", after.Attachment, want)
	}
	if after.Sockets != 2 || after.Tagged != 1 {
		t.Errorf("after hibernation: %d sockets, %d tagged user:ada; want 2 and 1", after.Sockets, after.Tagged)
	}
	if after.AutoResponseAt == nil || *after.AutoResponseAt < pingSent.UnixMilli() {
		t.Errorf("getWebSocketAutoResponseTimestamp = %v, want the ping's time (>= %d)", after.AutoResponseAt, pingSent.UnixMilli())
	}
	if got := roundTrip(t, bob, "echo:still here"); got != "still here" {
		t.Errorf("bob's socket after hibernation: %q", got)
	}
	t.Logf("constructions %d -> %d while 2 sockets stayed open", before.Constructions, after.Constructions)
}

// wsLimits: serializeAttachment refuses more than 16 KiB; a received message over
// 32 MiB closes the socket with 1009 (message too big).
// https://developers.cloudflare.com/durable-objects/platform/limits/
func wsLimits(t *testing.T, c *doCluster) {
	room, _ := nameOnShard(t, c, "limits", 1)
	ws := dialRoom(t, c.replicas[0], room, "ada", "")
	if got := roundTrip(t, ws, "attach:16000"); got != "attached" {
		t.Errorf("a 16,000-byte attachment: %q, want attached", got)
	}
	if got := roundTrip(t, ws, "attach:16400"); !strings.Contains(got, "cannot be larger than 16384 bytes") {
		t.Errorf("a 16,400-byte attachment: %q, want refused at 16384 bytes", got)
	}
	if got := roundTrip(t, ws, "timeout:5000"); got != "5000" {
		t.Errorf("setHibernatableWebSocketEventTimeout(5000) then get: %q", got)
	}
	big := make([]byte, 1<<20)
	if got := roundTrip(t, ws, "echo:"+string(big)); len(got) != len(big) {
		t.Errorf("a 1 MiB echo came back with %d bytes", len(got))
	}
	_ = ws.WriteMessage(websocket.BinaryMessage, make([]byte, 32<<20+1))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Errorf("after a message of 32 MiB + 1 byte: %v, want close 1009", err)
	}
}

// wsClose: a client's close code and reason reach the object's webSocketClose handler.
func wsClose(t *testing.T, c *doCluster) {
	room, _ := nameOnShard(t, c, "closing", 0)
	ada := dialRoom(t, c.replicas[0], room, "ada", "")
	bob := dialRoom(t, c.replicas[1], room, "bob", "")
	roundTrip(t, ada, "echo:x")
	_ = ada.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "bye"), time.Now().Add(5*time.Second))
	waitFor(t, "webSocketClose(4001, bye)", func() bool {
		return roundTrip(t, bob, "lastclose") == `{"code":4001,"reason":"bye"}`
	})
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
	if got := info(t, ws); got.Seq != 1 {
		t.Errorf("after the restart the room's seq is %d, want 1 (stored before)", got.Seq)
	}
	if got := roundTrip(t, ws, "lastclose"); !strings.Contains(got, `"code":1012`) {
		t.Errorf("the object's webSocketClose stored %s, want code 1012", got)
	}
}
