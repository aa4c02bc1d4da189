package cache

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Headers of workerd's cache protocol (workerd src/workerd/io/io-thread-context.c++).
const (
	headerStatus    = "CF-Cache-Status"
	headerNamespace = "CF-Cache-Namespace"
)

// Cache is the per-pod cache; it is an http.Handler for workerd's cacheApiOutbound.
type Cache struct{ s *store }

// New makes a Cache (emptying o.Dir: a restarted pod starts with an empty cache).
func New(o Options) (*Cache, error) {
	s, err := newStore(o)
	if err != nil {
		return nil, err
	}
	return &Cache{s: s}, nil
}

// Usage is the bytes of the bodies held in memory and on disk.
func (c *Cache) Usage() (mem, disk int64) { return c.s.usage() }

// ServeHTTP answers match (GET), put (PUT) and delete (PURGE). The key is the request
// target, the full URL in proxy style.
func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := keyOf(r.Header.Get(headerNamespace), r.RequestURI)
	switch r.Method {
	case http.MethodGet:
		c.match(w, r, key)
	case http.MethodPut:
		c.put(w, r, key)
	case "PURGE":
		if c.s.remove(key) {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	default:
		http.Error(w, "cache: method "+r.Method, http.StatusMethodNotAllowed)
	}
}

// put stores the serialized response of the body when the caching rules allow it;
// a response they do not allow is dropped silently, as Cloudflare's cache does.
func (c *Cache) put(w http.ResponseWriter, r *http.Request, key string) {
	res, err := http.ReadResponse(bufio.NewReader(r.Body), nil)
	if err != nil {
		http.Error(w, "cache: the payload is no HTTP response: "+err.Error(), http.StatusBadRequest)
		return
	}
	// res.Body is not closed: closing reads it to its end, and a body refused as too
	// large is left unread (the server closes the connection).
	d, ok := ttl(res.StatusCode, res.Header, c.s.o.Now())
	if !ok {
		_, _ = io.Copy(io.Discard, res.Body)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, size, done, err := c.s.sized(res)
	switch {
	case errors.Is(err, errTooLarge):
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	defer done()
	e := &entry{key: key, status: res.StatusCode, header: res.Header, size: size, expires: c.s.o.Now().Add(d)}
	if variesOnEncoding(res.Header) {
		ae := r.Header.Get("Accept-Encoding")
		e.encoding = &ae
	}
	for _, h := range []string{"Content-Length", "Transfer-Encoding", "Connection", headerStatus} {
		e.header.Del(h)
	}
	switch err := c.s.add(e, body); {
	case errors.Is(err, errTooLarge):
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// match answers a live entry (HIT; 304 when the request's conditions hold, 206 for a
// single satisfiable range) or 504 MISS.
func (c *Cache) match(w http.ResponseWriter, r *http.Request, key string) {
	e := c.s.get(key)
	if e != nil && e.encoding != nil && *e.encoding != r.Header.Get("Accept-Encoding") {
		e = nil
	}
	if e == nil {
		w.Header().Set(headerStatus, "MISS")
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	}
	body, err := e.open()
	if err != nil { // evicted meanwhile
		w.Header().Set(headerStatus, "MISS")
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	}
	defer body.Close()
	h := w.Header()
	for k, v := range e.header {
		h[k] = append([]string(nil), v...)
	}
	h.Set(headerStatus, "HIT")
	if notModified(r.Header, e.header) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	status, start, n := e.status, int64(0), e.size
	if s, l, ok := byteRange(r.Header.Get("Range"), e.size); ok && e.status == http.StatusOK {
		status, start, n = http.StatusPartialContent, s, l
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s, s+l-1, e.size))
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	if _, err := body.Seek(start, io.SeekStart); err == nil {
		_, _ = io.CopyN(w, body, n)
	}
}

// byteRange parses a Range header of one satisfiable byte range: start and length.
func byteRange(h string, size int64) (int64, int64, bool) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	first, last, _ := strings.Cut(spec, "-")
	if first == "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		n = min(n, size)
		return size - n, n, true
	}
	s, err := strconv.ParseInt(first, 10, 64)
	if err != nil || s >= size {
		return 0, 0, false
	}
	end := size - 1
	if last != "" {
		if end, err = strconv.ParseInt(last, 10, 64); err != nil || end < s {
			return 0, 0, false
		}
	}
	return s, min(end, size-1) - s + 1, true
}

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

func bytesReader(b []byte) io.ReadSeeker { return bytes.NewReader(b) }
