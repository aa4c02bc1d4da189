package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A WebSocket client of the room Durable Object internal/render/testdata/do/wsroom.js
// (its header lists the messages), shared by the render and e2e tests of Durable Object
// WebSockets (docs/durable-objects.md "WebSockets").

// WSRoomModule is the room Worker's module, relative to the repository root.
const WSRoomModule = "internal/render/testdata/do/wsroom.js"

// DialRoom opens a WebSocket to room at base ("host:port" of a Worker's http socket) as
// user; mode "plain" makes the object accept() it, "" hibernatable. Closed at cleanup.
func DialRoom(t testing.TB, base, room, user, mode string) *websocket.Conn {
	t.Helper()
	c, err := TryDialRoom(base, room, user, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TryDialRoom is DialRoom returning the error (the status and body of a refused
// upgrade); the caller closes the connection.
func TryDialRoom(base, room, user, mode string) (*websocket.Conn, error) {
	q := url.Values{"user": {user}}
	if mode != "" {
		q.Set("mode", mode)
	}
	u := "ws://" + base + "/room/" + url.PathEscape(room) + "?" + q.Encode()
	c, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		status := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			status = resp.Status + ": " + string(b)
		}
		return nil, fmt.Errorf("dial %s: %w %s", u, err, status)
	}
	return c, nil
}

// RoundTrip sends msg and returns the next message received.
func RoundTrip(t testing.TB, c *websocket.Conn, msg string) string {
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

// RoomInfo is the room's answer to "info".
type RoomInfo struct {
	Constructions  int             `json:"constructions"`
	ConstructedAt  int64           `json:"constructedAt"`
	Attachment     json.RawMessage `json:"attachment"`
	Sockets        int             `json:"sockets"`
	Tagged         int             `json:"tagged"`
	AutoResponseAt *int64          `json:"autoResponseAt"`
	Seq            int             `json:"seq"`
}

// Info asks the room for its RoomInfo over c.
func Info(t testing.TB, c *websocket.Conn) RoomInfo {
	t.Helper()
	var i RoomInfo
	s := RoundTrip(t, c, "info")
	if err := json.Unmarshal([]byte(s), &i); err != nil {
		t.Fatalf("info %q: %v", s, err)
	}
	return i
}

// CheckRoomBroadcasts: conns[r] are the clients of room r, client i joined as user
// "u<i>". Each client broadcasts `each` messages; every client must receive each
// broadcast of its room exactly once, in the room's order (seq 1..len(conns[r])*each).
func CheckRoomBroadcasts(t testing.TB, conns [][]*websocket.Conn, each int) {
	t.Helper()
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
			checkReceived(t, ws, fmt.Sprintf("room %d client %d", r, i), len(conns[r]), each)
		}
	}
}

func checkReceived(t testing.TB, ws *websocket.Conn, who string, clients, each int) {
	t.Helper()
	seen := map[string]int{}
	for n := 1; n <= clients*each; n++ {
		var m struct {
			Seq        int
			From, Text string
		}
		_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("%s, broadcast %d: %v", who, n, err)
		}
		if m.Seq != n {
			t.Fatalf("%s: broadcast seq %d, want %d (in order, once each)", who, m.Seq, n)
		}
		seen[m.From+" "+m.Text]++
	}
	for u := 0; u < clients; u++ {
		for k := 0; k < each; k++ {
			if key := fmt.Sprintf("u%d m%d-%d", u, u, k); seen[key] != 1 {
				t.Errorf("%s got %q %d times, want once", who, key, seen[key])
			}
		}
	}
}

// CheckRoomHibernation: ada (user "ada") and bob are the only clients of a room, both
// hibernatable. The object is evicted after 10 s without events (workerd's inactivity
// timeout) while both sockets stay open: the next message runs a new instance (the
// stored construction count went up by one), which finds both sockets (getWebSockets,
// tags) and ada's attachment. A "ping" in between is answered "pong" by workerd
// (setWebSocketAutoResponse) without waking the object: the new instance was
// constructed after that pong arrived.
// https://developers.cloudflare.com/durable-objects/best-practices/websockets/#websocket-hibernation-api
func CheckRoomHibernation(t testing.TB, ada, bob *websocket.Conn) {
	t.Helper()
	before := Info(t, ada)
	if before.Sockets != 2 || before.Tagged != 1 || before.AutoResponseAt != nil {
		t.Fatalf("before: %+v, want 2 sockets, 1 tagged user:ada, no auto-response yet", before)
	}
	var after RoomInfo
	var pingSent, pongAt time.Time
	for try := 0; ; try++ {
		time.Sleep(11 * time.Second)
		pingSent = time.Now().Truncate(time.Millisecond)
		if got := RoundTrip(t, ada, "ping"); got != "pong" {
			t.Fatalf("ping answered %q, want pong", got)
		}
		pongAt = time.Now()
		if after = Info(t, ada); after.Constructions > before.Constructions || try == 5 {
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
	if got := RoundTrip(t, bob, "echo:still here"); got != "still here" {
		t.Errorf("bob's socket after hibernation: %q", got)
	}
	t.Logf("constructions %d -> %d while 2 sockets stayed open", before.Constructions, after.Constructions)
}
