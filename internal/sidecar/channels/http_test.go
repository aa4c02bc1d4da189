package channels_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
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
