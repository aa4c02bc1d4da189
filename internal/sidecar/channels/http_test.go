package channels_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
)

// The raw HTTP API's answers for malformed requests and limits: status, stable code, and a
// message naming the field or limit (docs/channels.md).
func TestHTTPAPIErrors(t *testing.T) {
	spec := readSpec(t)
	h := newHarnessSidecarOnly(t)
	base := "http://" + h.sidecarAddr + "/channels/v1/objects/ns/obj/"
	do := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, raw)
		}
		return res.StatusCode, out
	}
	_, sub := do("POST", "subscribe", `{"channel":"room"}`)
	handle := sub["handle"].(string)
	cases := []struct {
		name, method, path, body string
		status                   int
		code, mentions           string
	}{
		{"body not JSON", "POST", "publish", `nope`, 400, "INVALID_ARGUMENT", "JSON"},
		{"missing channel", "POST", "subscribe", `{}`, 400, "INVALID_ARGUMENT", "channel"},
		{"missing message", "POST", "publish", `{"channel":"room"}`, 400, "INVALID_ARGUMENT", "message"},
		{"missing timeoutMs", "POST", "wait", `{"handle":"` + handle + `"}`, 400, "INVALID_ARGUMENT", "timeoutMs"},
		{"negative timeoutMs", "POST", "wait", `{"handle":"` + handle + `","timeoutMs":-1}`, 400, "INVALID_ARGUMENT", "timeoutMs"},
		{"timeoutMs over 15 min", "POST", "wait", `{"handle":"` + handle + `","timeoutMs":900001}`, 400, "INVALID_ARGUMENT", "900000"},
		{"empty channel name", "POST", "subscribe", `{"channel":""}`, 400, "INVALID_CHANNEL_NAME", "1..256"},
		{"channel name too long", "POST", "subscribe", `{"channel":"` + strings.Repeat("n", 257) + `"}`, 400, "INVALID_CHANNEL_NAME", "257"},
		{"message over the limit", "POST", "publish", `{"channel":"room","message":"` + strings.Repeat("a", spec.messageBytes+1) + `"}`, 413, "MESSAGE_TOO_LARGE", "channel_message_bytes"},
		{"count without channel", "GET", "subscribers", ``, 400, "INVALID_ARGUMENT", "channel"},
		{"unknown handle", "POST", "unsubscribe", `{"handle":"a:b-1"}`, 404, "UNKNOWN_HANDLE", "a:b-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, out := do(tc.method, tc.path, tc.body)
			e, _ := out["error"].(map[string]any)
			if status != tc.status || e["code"] != tc.code {
				t.Fatalf("%s %s: %d %v, want %d %s", tc.method, tc.path, status, out, tc.status, tc.code)
			}
			if msg := e["message"].(string) + " " + str(e["source"]); !strings.Contains(msg, tc.mentions) {
				t.Fatalf("error %q does not mention %q", msg, tc.mentions)
			}
		})
	}
	// The happy path answers of the same routes.
	if _, out := do("POST", "publish", `{"channel":"room","message":""}`); out["reached"] != float64(1) {
		t.Fatalf("publish empty: %v", out)
	}
	if _, out := do("POST", "wait", `{"handle":"`+handle+`","timeoutMs":0}`); out["outcome"] != "message" || out["message"] != "" {
		t.Fatalf("wait: %v, want the empty message", out)
	}
	if _, out := do("GET", "subscribers?channel=room", ``); out["subscribers"] != float64(1) {
		t.Fatalf("subscribers: %v", out)
	}
}

func str(v any) string { s, _ := v.(string); return s }

// A wait whose request context ends before its timeout (the caller may still be reading:
// seen under load) answers a JSON timeout, which consumes nothing, never an empty 200
// that the client cannot parse (docs/channels.md: a timed-out wait consumes nothing).
func TestWaitCutShortAnswersTimeout(t *testing.T) {
	m, err := channels.NewManager(channels.Options{Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	k := channels.Key{Namespace: "ns", Object: "o"}
	h, err := m.Subscribe(k, "room")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"handle":"` + h + `","timeoutMs":25000}`
	req, _ := http.NewRequest("POST", "http://sidecar/channels/v1/objects/ns/o/wait", strings.NewReader(body))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	w := httptest.NewRecorder()
	channels.Handler(m).ServeHTTP(w, req.WithContext(ctx))
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"outcome":"timeout"}` {
		t.Fatalf("a wait cut short answered %d %q, want 200 {\"outcome\":\"timeout\"}", w.Code, w.Body)
	}
	if _, err := m.Publish(k, "room", "kept"); err != nil {
		t.Fatal(err)
	}
	o, err := m.Wait(context.Background(), k, h, 0)
	if err != nil || o.Message != "kept" {
		t.Fatalf("the next wait: %+v %v, want the message published after", o, err)
	}
}

// A pipeline whose body ends cleanly leaves its connection fit for the next request: a
// wait sent on the same connection afterwards waits its timeout, not ending at once with
// a context its connection spent (net/http cancels a connection's context when its
// background read fails, which a read deadline set in the past made it do whenever the
// read's goroutine woke before the request was finished: a race, so 40 rounds).
func TestWaitAfterPipelineOnSameConnection(t *testing.T) {
	m, err := channels.NewManager(channels.Options{Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(channels.Handler(m))
	defer srv.Close()
	k := channels.Key{Namespace: "ns", Object: "o"}
	h, err := m.Subscribe(k, "room")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	base := srv.URL + "/channels/v1/objects/ns/o/"
	post := func(op, body string) string {
		res, err := hc.Post(base+op, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return strings.TrimSpace(string(b))
	}
	for round := 0; round < 40; round++ {
		if got := post("pipeline", `{"channel":"room","message":"m"}`+"\n"); got != `{"reached":1}` {
			t.Fatalf("round %d: pipeline answered %s", round, got)
		}
		if _, err := m.Wait(context.Background(), k, h, 0); err != nil { // takes "m"
			t.Fatal(err)
		}
		start := time.Now()
		got := post("wait", `{"handle":"`+h+`","timeoutMs":30}`)
		if waited := time.Since(start); waited < 25*time.Millisecond || got != `{"outcome":"timeout"}` {
			t.Fatalf("round %d: a wait of 30 ms after a pipeline on the same connection answered %s after %v", round, got, waited)
		}
	}
}
