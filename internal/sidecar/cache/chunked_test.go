package cache

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// chunkedPut is a serialized response with a chunked body of n bytes (no
// Content-Length: a Response whose body is a stream), produced as it is read; read
// counts the bytes the handler consumed.
type chunkedPut struct {
	left, read int64
	buf        []byte
	done       bool
}

func (c *chunkedPut) Read(p []byte) (int, error) {
	if len(c.buf) == 0 {
		switch {
		case c.read == 0:
			c.buf = []byte("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n")
		case c.left > 0:
			n := min(c.left, 32<<10)
			c.left -= n
			c.buf = append([]byte(fmt.Sprintf("%x\r\n", n)), make([]byte, n)...)
			c.buf = append(c.buf, "\r\n"...)
		case !c.done:
			c.done, c.buf = true, []byte("0\r\n\r\n")
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	c.read += int64(n)
	return n, nil
}

// TestChunkedPutBounded: a streamed body (chunked, no Content-Length) over
// MaxEntryBytes is refused with 413 having read little more than MaxEntryBytes, and
// one over the memory tier's entry size is not held in memory whole: the sidecar's
// memory is bounded by its budget, not by what a Worker streams into cache.put()
// (Cloudflare's limit per entry: 512 MB,
// https://developers.cloudflare.com/workers/runtime-apis/cache/#put).
func TestChunkedPutBounded(t *testing.T) {
	c, err := New(Options{Dir: t.TempDir(), MemoryBytes: 16 << 10, DiskBytes: 8 << 20, MaxEntryBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	body := &chunkedPut{left: 64 << 20}
	r := httptest.NewRequest(http.MethodPut, "https://a/big", body)
	r.RequestURI = "https://a/big"
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("put of a 64 MiB stream with MaxEntryBytes 4 MiB: %d, want 413", w.Code)
	}
	if body.read > 5<<20 {
		t.Errorf("the sidecar read %d bytes of the stream before refusing it, want at most ~MaxEntryBytes (4 MiB)", body.read)
	}
	ok := &chunkedPut{left: 1 << 20} // over MemoryBytes/16: goes to disk
	r = httptest.NewRequest(http.MethodPut, "https://a/ok", ok)
	r.RequestURI = "https://a/ok"
	w = httptest.NewRecorder()
	c.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		t.Fatalf("put of a 1 MiB stream: %d, want 204", w.Code)
	}
	if mem, disk := c.Usage(); mem != 0 || disk != 1<<20 {
		t.Errorf("usage memory %d, disk %d; want 0 and 1 MiB (on disk, over the memory tier's entry size)", mem, disk)
	}
	if g := call(t, c, http.MethodGet, "https://a/ok", ""); g.Body.Len() != 1<<20 {
		t.Errorf("GET: %d bytes, want 1 MiB", g.Body.Len())
	}
}
