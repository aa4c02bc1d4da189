package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/workerd-operator/workerd-operator/internal/userworkers"
)

// Bounds of the code cache.
const (
	// DefaultCodeTTL is how long an answer of the manager is used before it is asked
	// again (with the answer's ETag, so an unchanged Worker costs a 304).
	DefaultCodeTTL = 2 * time.Second
	// maxCodeEntries bounds the cache: at it, a quarter of the entries are dropped
	// (stale ones first), so a flood of names costs one sweep per 1,024 new names.
	maxCodeEntries = 4096
	// newNamesPerSecond and newNamesBurst bound how often the manager is asked about a
	// name this sidecar has no answer for: the dispatch Worker's get(name) often takes
	// the name from the request, so the internet chooses it.
	newNamesPerSecond, newNamesBurst = 500, 1000
)

// dedicatedAnswer is the answer without a manager to ask: every user Worker runs in
// its own pods.
var dedicatedAnswer = []byte(`{"placement":"Dedicated"}`)

// codeCache holds the manager's answers about user Workers, one request to it at a
// time per Worker.
type codeCache struct {
	client   *userworkers.Client
	ttl      time.Duration
	logf     func(format string, a ...any)
	newNames *rate.Limiter

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
	if e.answered.IsZero() && !c.newNames.Allow() {
		e.asked = time.Time{}
		return userworkers.Answer{}, errTooManyNames
	}
	etag := ""
	if e.answer.Status == http.StatusOK {
		etag = e.answer.ETag
	}
	a, err := c.client.Get(ctx, dns, name, etag)
	if err != nil {
		var refused *userworkers.StatusError
		if !e.answered.IsZero() && (!errors.As(err, &refused) || refused.Status >= 500) {
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
		c.sweep()
	}
	e := &codeEntry{}
	c.entries[key] = e
	return e
}

// sweep drops a quarter of the entries, stale ones first (map order is random, so the
// rest are any); an entry in use stays with its holder and is made again if needed.
func (c *codeCache) sweep() {
	target := maxCodeEntries * 3 / 4
	for _, staleOnly := range []bool{true, false} {
		for k, e := range c.entries {
			if len(c.entries) <= target {
				return
			}
			if !staleOnly || c.stale(e) {
				delete(c.entries, k)
			}
		}
	}
}

// stale reports whether e is idle (no request holds it) and past its TTL.
func (c *codeCache) stale(e *codeEntry) bool {
	if !e.mu.TryLock() {
		return false
	}
	defer e.mu.Unlock()
	return time.Since(e.asked) >= c.ttl
}

// errTooManyNames refuses a name the manager would be asked about past newNames.
var errTooManyNames = errors.New("too many user Workers this sidecar has no answer for asked at once")

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
		// The cause stays in the log: the dispatch Worker often passes the answer on to
		// its client.
		d.o.Logf("dispatch: user Worker %q: reading its code: %v", script, err)
		status := http.StatusBadGateway
		if errors.Is(err, errTooManyNames) {
			status = http.StatusServiceUnavailable
		}
		http.Error(w, fmt.Sprintf("dispatch: user Worker %q is unavailable: its code could not be read (the dispatch Worker's sidecar logs why)", script), status)
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
