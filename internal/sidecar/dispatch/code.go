package dispatch

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/userworkers"
)

// Bounds of the code cache.
const (
	// DefaultCodeTTL is how long an answer of the manager is used before it is asked
	// again (with the answer's ETag, so an unchanged Worker costs a 304).
	DefaultCodeTTL = 2 * time.Second
	// maxCodeEntries bounds the cache: past it, stale entries (names nobody asked
	// for within the TTL, including names that were not found) are dropped.
	maxCodeEntries = 4096
)

// dedicatedAnswer is the answer without a manager to ask: every user Worker runs in
// its own pods.
var dedicatedAnswer = []byte(`{"placement":"Dedicated"}`)

// codeCache holds the manager's answers about user Workers, one request to it at a
// time per Worker.
type codeCache struct {
	client *userworkers.Client
	ttl    time.Duration
	logf   func(format string, a ...any)

	mu      sync.Mutex
	entries map[string]*codeEntry
}

type codeEntry struct {
	mu     sync.Mutex
	answer userworkers.Answer
	// asked is when the manager was last asked, answered when it last answered.
	asked, answered time.Time
}

// get is the current answer about user Worker name of dispatch namespace dns.
func (c *codeCache) get(ctx context.Context, dns, name string) (userworkers.Answer, error) {
	e := c.entry(dns + "/" + name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.asked.IsZero() && time.Since(e.asked) < c.ttl {
		return e.answer, nil
	}
	e.asked = time.Now()
	etag := ""
	if e.answer.Status == http.StatusOK {
		etag = e.answer.ETag
	}
	a, err := c.client.Get(ctx, dns, name, etag)
	if err != nil {
		if !e.answered.IsZero() {
			// The manager is away (a restart, a rollout): its last answer stands, so the
			// user Workers loaded here keep answering until it is back.
			c.logf("dispatch: user Worker %s/%s: the manager did not answer (%v): its last answer, %s old, stands", dns, name, err, time.Since(e.answered).Round(time.Second))
			return e.answer, nil
		}
		e.asked = time.Time{} // nothing to stand: the next call asks again
		return userworkers.Answer{}, err
	}
	if a.Status != http.StatusNotModified {
		e.answer = a
	}
	e.answered = time.Now()
	return e.answer, nil
}

func (c *codeCache) entry(key string) *codeEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		return e
	}
	if len(c.entries) >= maxCodeEntries {
		for k, e := range c.entries {
			if e.mu.TryLock() {
				if time.Since(e.asked) >= c.ttl {
					delete(c.entries, k)
				}
				e.mu.Unlock()
			}
		}
	}
	e := &codeEntry{}
	c.entries[key] = e
	return e
}

// resolve answers shim dispatch.js's question about user Worker script of dispatch
// namespace ns: not-found, or render.LoaderCode (304 when the shim's If-None-Match is
// current).
func (d *Dispatcher) resolve(w http.ResponseWriter, r *http.Request, ns, script string) {
	if d.code == nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(dedicatedAnswer)
		return
	}
	a, err := d.code.get(r.Context(), ns, script)
	if err != nil {
		d.o.Logf("dispatch: user Worker %q: reading its code: %v", script, err)
		http.Error(w, fmt.Sprintf("dispatch: user Worker %q: cannot read its code: %s", script, strings.TrimSpace(err.Error())), http.StatusBadGateway)
		return
	}
	if a.Status == http.StatusNotFound {
		notFound(w)
		return
	}
	w.Header().Set("ETag", a.ETag)
	if r.Header.Get("If-None-Match") == a.ETag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(a.Body)
}
