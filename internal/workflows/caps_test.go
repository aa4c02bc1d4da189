package workflows_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// newIdleEngine is an engine whose runner is unreachable and retried once an hour:
// instances stay where the API puts them.
func newIdleEngine(t testing.TB) *workflows.Engine {
	t.Helper()
	e, err := workflows.New(workflows.Options{DataDir: t.TempDir(), RunnerURL: "http://127.0.0.1:9",
		Workflows: []api.WorkflowConfig{{Name: "w"}}, DispatchRetry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// pattern is an endless body of JSON-ish bytes that counts what was read from it.
type pattern struct{ n, max int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.n >= p.max {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.max-p.n)]
	for i := range b {
		b[i] = 'a'
	}
	p.n += int64(len(b))
	return len(b), nil
}

// countingHandler counts the request body bytes h reads.
func countingHandler(h http.Handler, read *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &countedBody{r.Body, read}
		h.ServeHTTP(w, r)
	})
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countedBody) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// A 127 MiB body to every route that takes one is refused with 413 and a message naming
// the limit and its source, and the engine reads at most the limit (nothing when the
// length is declared).
func TestBodyOverLimitRefused(t *testing.T) {
	var read atomic.Int64
	srv := httptest.NewServer(countingHandler(newIdleEngine(t).Handler(), &read))
	defer srv.Close()
	const size = 127 << 20
	params := limits.Get(limits.DefaultProfile, limits.WorkflowParamsBytes)
	for _, tc := range []struct{ path, limit string }{
		{"/workflows/w/instances", string(limits.WorkflowParamsBytes)},
		{"/workflows/w/instances/x/events", string(limits.WorkflowParamsBytes)},
		{"/workflows/w/batch", string(limits.WorkflowBatchBytes)},
		{"/workflows/_run/attempt", string(limits.WorkflowStepResultBytes)},
		{"/workflows/_run/step", "project decision"},
		{"/workflows/w/bulk/terminate", "project decision"},
	} {
		for _, declared := range []bool{true, false} {
			read.Store(0)
			var body io.Reader = &pattern{max: size}
			if !declared {
				body = io.MultiReader(body) // hides the length: chunked
			}
			req, _ := http.NewRequest("POST", srv.URL+tc.path, body)
			if declared {
				req.ContentLength = size
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("POST %s (declared %v): %v", tc.path, declared, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			msg := string(b)
			if resp.StatusCode != 413 || !strings.Contains(msg, tc.limit) || !strings.Contains(msg, "source") {
				t.Errorf("POST %s (declared %v): %d %.300s; want 413 naming %s and its source", tc.path, declared, resp.StatusCode, msg, tc.limit)
			}
			if n := read.Load(); n > 2*params || (declared && n > 0) {
				t.Errorf("POST %s (declared %v): the engine read %d bytes of the body", tc.path, declared, n)
			}
		}
	}
}

// ?limit=1000 over instances with 1 MiB params: every page stays under the response cap
// and the cursors still reach every instance once, in order.
func TestListBytesCapped(t *testing.T) {
	e := newIdleEngine(t)
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	params := limits.Get(limits.DefaultProfile, limits.WorkflowParamsBytes)
	big, _ := json.Marshal(strings.Repeat("p", int(params)-2))
	const n = 24
	for i := range n {
		if _, err := e.Create("w", api.CreateOptions{ID: fmt.Sprintf("i%02d", i), Params: big}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	pages, cursor := 0, ""
	for {
		resp, err := http.Get(srv.URL + "/workflows/w/instances?limit=1000&cursor=" + cursor)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("list: %d %.300s", resp.StatusCode, b)
		}
		if len(b) > workflows.MaxResponseBytes {
			t.Fatalf("page %d is %d bytes, over the %d-byte response cap", pages, len(b), workflows.MaxResponseBytes)
		}
		var page api.ListPage
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&page); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, in := range page.Instances {
			ids = append(ids, in.ID)
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	t.Logf("%d instances with %d-byte params: %d pages under %d bytes", n, len(big), pages, workflows.MaxResponseBytes)
	if len(ids) != n {
		t.Fatalf("listed %d instances, want %d: %v", len(ids), n, ids)
	}
	for i, id := range ids {
		if id != fmt.Sprintf("i%02d", i) {
			t.Fatalf("instance %d is %s: %v", i, id, ids)
		}
	}
}

// A step result of 3 MiB fails the step as too large (the runner sends its size, not
// the result), and an error message of a million characters arrives clipped: neither
// report is over the engine's body limit.
func TestOversizedStepReports(t *testing.T) {
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "big"}, "Big", "BIG"})
	h.create("big", "result", map[string]any{"chars": 3 << 20})
	h.create("big", "error", map[string]any{"mode": "throw", "chars": 1 << 20})
	in := h.waitStatus("big", "result", api.StatusErrored, api.StatusComplete)
	if in.Error == nil || !strings.Contains(in.Error.Message, fmt.Sprintf("output is too large. Maximum allowed size is 1MiB. (%d bytes", 3<<20+2)) {
		t.Errorf("3 MiB result: status %s, error %+v", in.Status, in.Error)
	}
	in = h.waitStatus("big", "error", api.StatusErrored, api.StatusComplete)
	if in.Error == nil || in.Error.Message != strings.Repeat("e", 8192)+"…" {
		t.Errorf("a million-character error: status %s, error message of %d bytes", in.Status, len(in.Error.Message))
	}
}

// A step result of 1 MiB (the limit) and params of 1 MiB reach the runner over the run
// link (a WebSocket; kj's default message limit was 1 MiB, the pinned workerd's is
// 32 MiB): the run gets its params, and after a sleep its replay gets the stored result.
func TestLimitSizedMessagesReachRunner(t *testing.T) {
	h := newHarness(t, 1, wfDef{api.WorkflowConfig{Name: "bigreplay"}, "BigReplay", "BIGREPLAY"})
	chars := 1<<20 - 2 // a JSON string of exactly 1 MiB
	pad := strings.Repeat("€", 340_000)
	h.create("bigreplay", "r1", map[string]any{"chars": chars, "pad": pad})
	in := h.waitStatus("bigreplay", "r1", api.StatusComplete, api.StatusErrored)
	want := fmt.Sprintf(`{"euros":true,"pad":%d,"result":%d}`, len(pad)/3, chars)
	var got map[string]any
	_ = json.Unmarshal(in.Output, &got)
	b, _ := json.Marshal(got)
	if in.Status != api.StatusComplete || string(b) != want {
		t.Fatalf("status %s, output %s, error %+v; want complete with %s", in.Status, b, in.Error, want)
	}
	if in.Dispatches < 2 {
		t.Fatalf("%d dispatches: the sleep did not make the run replay its step", in.Dispatches)
	}
}
