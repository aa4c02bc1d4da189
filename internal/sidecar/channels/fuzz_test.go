package channels_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
)

// fuzzRoutes are the channel API's routes (the last one is none of them).
var fuzzRoutes = []struct{ method, op string }{
	{"POST", "subscribe"}, {"POST", "publish"}, {"POST", "wait"}, {"POST", "unsubscribe"},
	{"POST", "close"}, {"GET", "subscribers"}, {"GET", "info"}, {"DELETE", "nothing"},
}

var (
	fuzzOnce    sync.Once
	fuzzHandler http.Handler
	fuzzHandle  string // a live handle of object ns/o, channel room
)

// maxAnswer bounds any answer of the channel API for a request of n bytes: a message of
// MaxMessageBytes JSON-escaped (at most 6 bytes a byte), the error texts, and what the
// request itself may have echoed (its path and fields, escaped).
func maxAnswer(n int) int { return 6*channels.DefaultLimits().MaxMessageBytes + 4096 + 6*n }

// Any request to the channel API: no panic, no answer over maxAnswer, no wait longer
// than the request's context.
func FuzzChannelsAPI(f *testing.F) {
	f.Add(uint8(0), "ns", "o", []byte(`{"channel":"room"}`))
	f.Add(uint8(1), "ns", "o", []byte(`{"channel":"room","message":"hi <&>"}`))
	f.Add(uint8(2), "ns", "o", []byte(`{"handle":"H","timeoutMs":0}`))
	f.Add(uint8(2), "ns", "o", []byte(`{"handle":"x:y-1","timeoutMs":1e300}`))
	f.Add(uint8(3), "ns", "other", []byte(`{"handle":"H"}`))
	f.Add(uint8(4), "ns", "o", []byte(`{"channel":"room","reason":"bye"}`))
	f.Add(uint8(5), "ns", "o", []byte("channel=room"))
	f.Add(uint8(6), "", "", []byte(nil))
	f.Add(uint8(7), "a/b", "%zz", []byte(`{"channel":`))
	f.Fuzz(func(t *testing.T, op uint8, ns, obj string, body []byte) {
		fuzzOnce.Do(func() {
			m, err := channels.NewManager(channels.Options{Lease: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			fuzzHandle, _ = m.Subscribe(channels.Key{Namespace: "ns", Object: "o"}, "room")
			fuzzHandler = channels.Handler(m)
		})
		rt := fuzzRoutes[int(op)%len(fuzzRoutes)]
		body = bytes.ReplaceAll(body, []byte("H"), []byte(fuzzHandle))
		target := "/channels/v1/objects/" + url.PathEscape(ns) + "/" + url.PathEscape(obj) + "/" + rt.op
		if rt.op == "info" {
			target = "/channels/v1/info"
		}
		if rt.method == "GET" {
			target += "?" + url.PathEscape(string(body))
		}
		req, err := http.NewRequest(rt.method, "http://sidecar"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		w := httptest.NewRecorder()
		fuzzHandler.ServeHTTP(w, req.WithContext(ctx))
		if n := w.Body.Len(); n > maxAnswer(len(target)+len(body)) {
			t.Fatalf("%s %s: answer of %d bytes, over %d", rt.method, target, n, maxAnswer(len(target)+len(body)))
		}
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s: %d %s", rt.method, target, w.Code, w.Body)
		}
	})
}
