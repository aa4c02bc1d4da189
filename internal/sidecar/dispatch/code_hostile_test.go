package dispatch

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/userworkers"
)

// TestHostileCodeCacheUnbounded: a flood of names (the internet choosing get()'s
// argument) keeps the cache within maxCodeEntries at an amortized cost per new name, and
// reaches the manager no faster than the new-names limit.
func TestHostileCodeCacheUnbounded(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	d := New(Options{Domain: "sites.svc.cluster.local", Code: &userworkers.Client{Base: srv.URL, HTTP: srv.Client()}, CodeTTL: time.Minute})
	const n = 20000
	start := time.Now()
	for i := 0; i < n; i++ {
		resolveCall(d, fmt.Sprintf("nobody-%d", i), "")
	}
	fill := time.Since(start)
	// The cost of the map alone: entries added straight to a full cache.
	c := d.code
	begin := time.Now()
	for i := 0; i < 2000; i++ {
		c.entry(fmt.Sprintf("customers/extra-%d", i))
	}
	per := time.Since(begin) / 2000
	t.Logf("%d names: %d entries (bound %d), %d manager calls, fill %v; entry() on the full cache: %v each", n, len(c.entries), maxCodeEntries, calls.Load(), fill, per)
	if len(c.entries) > maxCodeEntries {
		t.Errorf("the code cache holds %d entries, past its bound %d", len(c.entries), maxCodeEntries)
	}
	// New names reach the manager at newNamesPerSecond past newNamesBurst.
	if allowed := newNamesBurst + newNamesPerSecond*fill.Seconds() + 1; float64(calls.Load()) > allowed {
		t.Errorf("%d new names cost %d manager calls in %v, more than the %.0f the limit allows", n, calls.Load(), fill, allowed)
	}
	if per > 100*time.Microsecond {
		t.Errorf("entry() on a full cache takes %v: the sweep is not amortized", per)
	}
}

// TestHostileErrorLeak: what the dispatch Worker (and, through it, the internet) reads
// when the manager is away or refuses.
func TestHostileErrorLeak(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `configmaps "code" is forbidden: User "system:serviceaccount:workerd-system:workerd-operator" cannot get resource`, http.StatusConflict)
	}))
	d := New(Options{Domain: "sites.svc.cluster.local", Code: &userworkers.Client{Base: srv.URL, HTTP: srv.Client()}})
	w := resolveCall(d, "site-a", "")
	t.Logf("manager refuses: %d %q", w.Code, w.Body)
	srv.Close()
	w = resolveCall(d, "site-b", "")
	t.Logf("manager away: %d %q", w.Code, w.Body)
	if strings.Contains(w.Body.String(), srv.URL) {
		t.Errorf("the 502 the dispatch Worker gets names the manager's address: %q", w.Body)
	}
}

// TestHostileRefusalKeepsOldCode: once the manager answered, any later non-404 answer
// (409: its ConfigMap is gone; 401: the certificate no longer verifies) keeps the old
// code forever, as if the manager were away.
func TestHostileRefusalKeepsOldCode(t *testing.T) {
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() {
			http.Error(w, "spec.source.configMap.name: ConfigMap \"code\" not found", http.StatusConflict)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte(`{"placement":"Shared","id":"v1"}`))
	}))
	t.Cleanup(srv.Close)
	d := New(Options{Domain: "sites.svc.cluster.local", Code: &userworkers.Client{Base: srv.URL, HTTP: srv.Client()}, CodeTTL: 20 * time.Millisecond, Logf: func(string, ...any) {}})
	if w := resolveCall(d, "site-a", ""); w.Code != http.StatusOK {
		t.Fatal(w.Code)
	}
	refuse.Store(true)
	for i := 0; i < 5; i++ {
		time.Sleep(30 * time.Millisecond)
		if w := resolveCall(d, "site-a", ""); w.Code == http.StatusOK {
			if i == 4 {
				t.Errorf("5 TTLs after the manager said the code no longer resolves (409), the sidecar still serves v1: %q", w.Body)
			}
		}
	}
}
