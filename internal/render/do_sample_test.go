package render_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestChatSample runs config/samples/fleet_v1alpha1_chat.yaml: its shards and one
// replica of its Worker, then posts to two rooms and reads them back.
func TestChatSample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts workerd")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	w, d := readWorkerAndNamespace(t, filepath.Join(root, "config", "samples", "fleet_v1alpha1_chat.yaml"))
	d.UID = types.UID("5a3e0c1d-0000-4000-8000-000000000001") // the API server sets it
	c := startDOClusterFor(t, w, d, 1)
	base := "http://" + c.replicas[0].addr(podcontract.HTTPSocket)

	// A listener on /events (through the router to the room's shard) receives the
	// next message posted to the room, published on its durable channel.
	events := openEvents(t, base+"/rooms/lobby/events")
	for _, room := range []string{"lobby", "random"} {
		for _, text := range []string{"hello " + room, "bye " + room} {
			resp, err := http.Post(base+"/rooms/"+room+"/messages", "application/json", strings.NewReader(`{"user":"ada","text":"`+text+`"}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				t.Fatalf("POST %s: %d %s", room, resp.StatusCode, b)
			}
		}
	}
	for _, text := range []string{"hello lobby", "bye lobby"} {
		var got struct {
			Seq        int
			User, Text string
		}
		if err := json.Unmarshal([]byte(events.next(t)), &got); err != nil {
			t.Fatal(err)
		}
		if got.User != "ada" || got.Text != text {
			t.Fatalf("event %+v, want ada: %q", got, text)
		}
	}
	for _, room := range []string{"lobby", "random"} {
		resp, err := http.Get(base + "/rooms/" + room + "/messages")
		if err != nil {
			t.Fatal(err)
		}
		var msgs []struct{ User, Text string }
		err = json.NewDecoder(resp.Body).Decode(&msgs)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2 || msgs[0].Text != "hello "+room || msgs[1].Text != "bye "+room || msgs[0].User != "ada" {
			t.Errorf("room %s: %+v", room, msgs)
		}
	}
	resp, err := http.Post(base+"/rooms/lobby/messages", "application/json", strings.NewReader(`{"user":"ada","text":""}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "user and text must be non-empty strings") {
		t.Errorf("empty text: %d %s", resp.StatusCode, b)
	}
}

// sseStream reads the data lines of a text/event-stream response.
type sseStream struct {
	lines chan string
}

// openEvents GETs url, waits for the stream's first comment (": subscribed", sent once
// the listener's subscription exists) and returns the stream.
func openEvents(t testing.TB, url string) *sseStream {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("content-type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s %s", url, resp.StatusCode, resp.Header.Get("content-type"), b)
	}
	s := &sseStream{lines: make(chan string, 64)}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != ": subscribed" {
		t.Fatalf("GET %s: first line %q (%v), want \": subscribed\"", url, sc.Text(), sc.Err())
	}
	go func() {
		defer close(s.lines)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				s.lines <- d
			}
		}
	}()
	return s
}

// next returns the next event's data; the test fails if the stream ends first or
// nothing arrives for 2 minutes (a hang guard, not a timing assertion).
func (s *sseStream) next(t testing.TB) string {
	t.Helper()
	select {
	case d, ok := <-s.lines:
		if !ok {
			t.Fatal("event stream ended")
		}
		return d
	case <-time.After(2 * time.Minute):
		t.Fatal("no event in 2 minutes")
	}
	return ""
}
