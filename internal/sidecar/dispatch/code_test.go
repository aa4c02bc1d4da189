package dispatch

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/userworkers"
)

// manager plays the manager's internal API: site-a is Shared with ETag "v1", anything
// else not found; it counts requests and can go away.
type manager struct {
	calls atomic.Int32
	srv   *httptest.Server
}

func newManager(t *testing.T) *manager {
	m := &manager{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.calls.Add(1)
		if r.URL.Path != userworkers.Path+"customers/site-a" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write([]byte(`{"placement":"Shared","id":"v1"}`))
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func resolveCall(d *Dispatcher, script, etag string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "http://dispatch/", nil)
	r.Header.Set(podcontract.DispatchNamespaceHeader, "customers")
	r.Header.Set(podcontract.DispatchScriptHeader, script)
	r.Header.Set(podcontract.DispatchResolveHeader, "1")
	if etag != "" {
		r.Header.Set("If-None-Match", etag)
	}
	w := httptest.NewRecorder()
	d.ServeHTTP(w, r)
	return w
}

// TestResolve: the sidecar answers the shim from the manager's answers, asking the
// manager at most once per TTL per user Worker (then with its ETag), passes on 304 and
// not-found, and keeps answering from the last answer while the manager is away.
func TestResolve(t *testing.T) {
	m := newManager(t)
	d := New(Options{Domain: "sites.svc.cluster.local", Code: &userworkers.Client{Base: m.srv.URL, HTTP: m.srv.Client()}, CodeTTL: 200 * time.Millisecond})
	if w := resolveCall(d, "site-a", ""); w.Code != http.StatusOK || w.Body.String() != `{"placement":"Shared","id":"v1"}` || w.Header().Get("ETag") != `"v1"` {
		t.Fatalf("site-a: %d %q %q", w.Code, w.Body, w.Header().Get("ETag"))
	}
	if w := resolveCall(d, "site-a", `"v1"`); w.Code != http.StatusNotModified {
		t.Errorf("site-a with its ETag: %d, want 304", w.Code)
	}
	if n := m.calls.Load(); n != 1 {
		t.Errorf("the manager was asked %d times within the TTL, want 1", n)
	}
	if w := resolveCall(d, "nobody", ""); w.Code != http.StatusNotFound || w.Header().Get(podcontract.DispatchErrorHeader) != podcontract.DispatchNotFound {
		t.Errorf("nobody: %d %q, want the not-found answer", w.Code, w.Header())
	}
	time.Sleep(250 * time.Millisecond)
	m.srv.Close()
	if w := resolveCall(d, "site-a", `"v1"`); w.Code != http.StatusNotModified {
		t.Errorf("site-a with the manager away: %d %q, want its last answer (304)", w.Code, w.Body)
	}
	if w := resolveCall(d, "never-asked", ""); w.Code != http.StatusBadGateway {
		t.Errorf("a user Worker never answered for, the manager away: %d, want 502", w.Code)
	}
}

// TestResolveWithoutManager: with no manager to ask every user Worker is Dedicated.
func TestResolveWithoutManager(t *testing.T) {
	d := New(Options{Domain: "sites.svc.cluster.local"})
	if w := resolveCall(d, "site-a", ""); w.Code != http.StatusOK || w.Body.String() != string(dedicatedAnswer) {
		t.Errorf("%d %q, want %s", w.Code, w.Body, dedicatedAnswer)
	}
}
