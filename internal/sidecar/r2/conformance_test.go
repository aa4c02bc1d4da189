package r2_test

import (
	"testing"
)

func TestSmoke(t *testing.T) {
	h := newHarness(t)
	r := h.call("put", "a", "hello world", map[string]any{"httpMetadata": map[string]string{"contentType": "text/plain"}, "customMetadata": map[string]string{"Owner": "alice"}})
	t.Logf("put: %+v %s", r, r.Result)
	r = h.call("get", "a")
	t.Logf("get: %+v %s", r, r.Result)
	r = h.call("list", map[string]any{"include": []string{"httpMetadata"}})
	t.Logf("list: %+v %s", r, r.Result)
}
