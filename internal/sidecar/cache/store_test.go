package cache

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// serialized is a response as workerd's put sends it.
func serialized(cc string, body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nCache-Control: %s\r\nContent-Length: %d\r\n\r\n%s", cc, len(body), body)
}

func call(t *testing.T, c *Cache, method, url, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, url, strings.NewReader(body))
	r.RequestURI = url
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

// TestExpiry: an entry is served until its max-age has passed, then it is a MISS.
func TestExpiry(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c, err := New(Options{MemoryBytes: 1 << 20, MaxEntryBytes: 1 << 20, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if w := call(t, c, http.MethodPut, "https://a/x", serialized("max-age=60", "v")); w.Code != http.StatusNoContent {
		t.Fatalf("put: %d", w.Code)
	}
	now = now.Add(59 * time.Second)
	if w := call(t, c, http.MethodGet, "https://a/x", ""); w.Header().Get(headerStatus) != "HIT" || w.Body.String() != "v" {
		t.Fatalf("at 59 s: %s %q", w.Header().Get(headerStatus), w.Body)
	}
	now = now.Add(time.Second)
	if w := call(t, c, http.MethodGet, "https://a/x", ""); w.Header().Get(headerStatus) != "MISS" || w.Code != http.StatusGatewayTimeout {
		t.Fatalf("at 60 s: %s %d, want MISS 504", w.Header().Get(headerStatus), w.Code)
	}
}

// TestBounds: the memory and disk budgets hold; the least recently used entry goes
// first; an entry over MaxEntryBytes or its budget is refused with 413.
func TestBounds(t *testing.T) {
	dir := t.TempDir()
	c, err := New(Options{Dir: dir, MemoryBytes: 16 * 100, DiskBytes: 3000, MaxEntryBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	small := strings.Repeat("s", 100) // in memory: up to MemoryBytes/16
	for i := range 20 {
		call(t, c, http.MethodPut, fmt.Sprintf("https://a/m%d", i), serialized("max-age=60", small))
		if i == 10 {
			call(t, c, http.MethodGet, "https://a/m0", "") // m0 becomes the most recently used
		}
	}
	mem, _ := c.Usage()
	if mem > 16*100 {
		t.Fatalf("memory %d bytes, over the budget %d", mem, 16*100)
	}
	if call(t, c, http.MethodGet, "https://a/m0", "").Code != http.StatusOK || call(t, c, http.MethodGet, "https://a/m1", "").Code != http.StatusGatewayTimeout {
		t.Fatal("LRU: m0 (used recently) should stay, m1 (oldest) should be gone")
	}
	big := strings.Repeat("b", 1000) // on disk
	for i := range 5 {
		call(t, c, http.MethodPut, fmt.Sprintf("https://a/d%d", i), serialized("max-age=60", big))
	}
	_, disk := c.Usage()
	files, _ := os.ReadDir(dir)
	if disk > 3000 || len(files) != 3 {
		t.Fatalf("disk %d bytes in %d files, want at most 3000 in 3", disk, len(files))
	}
	if w := call(t, c, http.MethodGet, "https://a/d4", ""); !bytes.Equal(w.Body.Bytes(), []byte(big)) {
		t.Fatal("the newest disk entry is not served whole")
	}
	if w := call(t, c, http.MethodPut, "https://a/huge", serialized("max-age=60", strings.Repeat("h", 2001))); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("an entry over MaxEntryBytes: %d, want 413", w.Code)
	}
}
