package workflows_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/workflows"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// fuzzEngineRoutes are the engine API's routes; {wf} and {id} are filled in.
var fuzzEngineRoutes = []struct{ method, path string }{
	{"POST", "/workflows/{wf}/instances"}, {"POST", "/workflows/{wf}/batch"},
	{"GET", "/workflows/{wf}/instances"}, {"GET", "/workflows/{wf}/stats"},
	{"GET", "/workflows/{wf}/instances/{id}"}, {"GET", "/workflows/{wf}/instances/{id}/steps"},
	{"DELETE", "/workflows/{wf}/instances/{id}"}, {"POST", "/workflows/{wf}/instances/{id}/pause"},
	{"POST", "/workflows/{wf}/instances/{id}/resume"}, {"POST", "/workflows/{wf}/instances/{id}/terminate"},
	{"POST", "/workflows/{wf}/instances/{id}/restart"}, {"POST", "/workflows/{wf}/instances/{id}/events"},
	{"POST", "/workflows/{wf}/bulk/terminate"}, {"POST", "/workflows/{wf}/bulk/delete"},
	{"POST", "/workflows/_run/step"}, {"POST", "/workflows/_run/attempt"},
}

// fuzzEngine is an engine with an unreachable runner, made again every 5,000 calls so
// its store stays small.
type fuzzEngine struct {
	e     *workflows.Engine
	h     http.Handler
	dir   string
	calls int
}

func (f *fuzzEngine) handler(t *testing.T) http.Handler {
	if f.calls%5000 == 0 {
		if f.e != nil {
			f.e.Close()
			os.RemoveAll(f.dir)
		}
		dir, err := os.MkdirTemp("", "fuzz-workflows-")
		if err != nil {
			t.Fatal(err)
		}
		e, err := workflows.New(workflows.Options{DataDir: dir, RunnerURL: "http://127.0.0.1:9",
			Workflows: []api.WorkflowConfig{{Name: "w"}}, DispatchRetry: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		f.e, f.h, f.dir = e, e.Handler(), dir
	}
	f.calls++
	return f.h
}

// Any request to the engine API: no panic, no 500, no answer over MaxResponseBytes.
func FuzzWorkflowsAPI(f *testing.F) {
	f.Add(uint8(0), "w", "", []byte(`{"id":"a","params":{"x":"<&>"}}`))
	f.Add(uint8(1), "w", "", []byte(`{"count":3,"params":[1,2]}`))
	f.Add(uint8(1), "w", "", []byte(`{"instances":[{"id":"a"},{"id":"a"}]}`))
	f.Add(uint8(2), "w", "", []byte("limit=1000&status=queued"))
	f.Add(uint8(4), "w", "a", []byte(nil))
	f.Add(uint8(9), "w", "a", []byte(nil))
	f.Add(uint8(11), "w", "a", []byte(`{"type":"go","payload":{"n":1}}`))
	f.Add(uint8(12), "w", "", []byte(`{"ids":["a","b","a"]}`))
	f.Add(uint8(14), "", "", []byte(`{"workflow":"w","id":"a","runId":1,"kind":"do","name":"s","count":1}`))
	f.Add(uint8(15), "", "", []byte(`{"workflow":"w","id":"a","runId":1,"name":"s","count":1,"attempt":1,"ok":true,"result":1}`))
	f.Add(uint8(3), "nope", "", []byte(nil))
	eng := &fuzzEngine{}
	defer func() {
		if eng.e != nil {
			eng.e.Close()
			os.RemoveAll(eng.dir)
		}
	}()
	f.Fuzz(func(t *testing.T, op uint8, wf, id string, body []byte) {
		rt := fuzzEngineRoutes[int(op)%len(fuzzEngineRoutes)]
		target := rt.path
		target = strings.ReplaceAll(target, "{wf}", url.PathEscape(wf))
		target = strings.ReplaceAll(target, "{id}", url.PathEscape(id))
		if rt.method == "GET" {
			target += "?" + string(bytes.ToValidUTF8(bytes.ReplaceAll(body, []byte("#"), nil), nil))
		}
		req, err := http.NewRequest(rt.method, "http://sidecar"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		w := httptest.NewRecorder()
		eng.handler(t).ServeHTTP(w, req)
		if n := w.Body.Len(); n > workflows.MaxResponseBytes {
			t.Fatalf("%s %s: answer of %d bytes, over %d", rt.method, target, n, workflows.MaxResponseBytes)
		}
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.method, target, body, w.Code, w.Body)
		}
	})
}
