package cache

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// Options bound the cache.
type Options struct {
	// Dir holds the entries kept on disk; "" keeps none there.
	Dir string
	// MemoryBytes bounds the bodies kept in memory; entries up to MemoryBytes/16 go
	// there, larger ones to disk.
	MemoryBytes int64
	// DiskBytes bounds the bodies kept under Dir.
	DiskBytes int64
	// MaxEntryBytes is the largest body put accepts (Cloudflare: 512 MB, DocCacheAPI);
	// a larger one is refused with 413, as is one larger than its budget.
	MaxEntryBytes int64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Defaults of the sidecar's flags.
const (
	DefaultMemoryBytes   = 32 << 20
	DefaultDiskBytes     = 1 << 30
	DefaultMaxEntryBytes = 512 << 20
)

// entry is one cached response.
type entry struct {
	key     string
	status  int
	header  http.Header
	body    []byte // in memory, or
	file    string // on disk
	size    int64
	expires time.Time
	// encoding is the request's Accept-Encoding when the response varies on it.
	encoding *string
	elem     *list.Element
}

// store is the entries by key with their LRU order and the bytes of each tier.
type store struct {
	o       Options
	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List // front: most recently used
	mem     int64
	disk    int64
}

func newStore(o Options) (*store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Dir != "" {
		if err := os.RemoveAll(o.Dir); err != nil { // a restarted pod starts empty
			return nil, err
		}
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, err
		}
	}
	return &store{o: o, entries: map[string]*entry{}, lru: list.New()}, nil
}

// errTooLarge: the body exceeds MaxEntryBytes or its tier's budget.
var errTooLarge = fmt.Errorf("cache: entry too large")

// add stores e with its body read from r (size bytes), replacing an entry of the same
// key and evicting the least recently used of its tier until it fits.
func (s *store) add(e *entry, r io.Reader) error {
	inMemory := e.size <= s.o.MemoryBytes/16
	if e.size > s.o.MaxEntryBytes || (!inMemory && (s.o.Dir == "" || e.size > s.o.DiskBytes)) {
		return errTooLarge
	}
	if inMemory {
		b, err := io.ReadAll(io.LimitReader(r, e.size))
		if err != nil {
			return err
		}
		e.body = b
	} else if err := s.writeFile(e, r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.entries[e.key]; old != nil {
		s.removeLocked(old)
	}
	for (inMemory && s.mem+e.size > s.o.MemoryBytes) || (!inMemory && s.disk+e.size > s.o.DiskBytes) {
		if !s.evictLocked(inMemory) {
			break
		}
	}
	s.entries[e.key] = e
	e.elem = s.lru.PushFront(e)
	if inMemory {
		s.mem += e.size
	} else {
		s.disk += e.size
	}
	return nil
}

// sized is the response body and its length, and done, which releases what sized
// held. A body without Content-Length (a stream, chunked) is read into memory up to
// the memory tier's entry size and spooled to a file of Dir beyond it, never past
// MaxEntryBytes or DiskBytes (errTooLarge): what a Worker streams into put() costs
// the sidecar no more memory than a body of known length.
func (s *store) sized(res *http.Response) (io.Reader, int64, func(), error) {
	if res.ContentLength >= 0 {
		return res.Body, res.ContentLength, func() {}, nil
	}
	memMax := min(s.o.MemoryBytes/16, s.o.MaxEntryBytes)
	b, err := io.ReadAll(io.LimitReader(res.Body, memMax+1))
	if err != nil || int64(len(b)) <= memMax {
		return bytes.NewReader(b), int64(len(b)), func() {}, err
	}
	limit := min(s.o.MaxEntryBytes, s.o.DiskBytes)
	if s.o.Dir == "" {
		return nil, 0, nil, errTooLarge
	}
	f, err := os.CreateTemp(s.o.Dir, "spool-*")
	if err != nil {
		return nil, 0, nil, err
	}
	done := func() { f.Close(); os.Remove(f.Name()) }
	n, err := io.Copy(f, io.MultiReader(bytes.NewReader(b), io.LimitReader(res.Body, limit-int64(len(b))+1)))
	if err == nil && n > limit {
		err = errTooLarge
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		done()
		return nil, 0, nil, err
	}
	return f, n, done, nil
}

func (s *store) writeFile(e *entry, r io.Reader) error {
	f, err := os.CreateTemp(s.o.Dir, "entry-*")
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, e.size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != e.size {
		err = fmt.Errorf("cache: body of %d bytes, want %d", n, e.size)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	e.file = f.Name()
	return nil
}

// evictLocked drops the least recently used entry of the tier; false when it has none.
func (s *store) evictLocked(inMemory bool) bool {
	for el := s.lru.Back(); el != nil; el = el.Prev() {
		if e := el.Value.(*entry); (e.file == "") == inMemory {
			s.removeLocked(e)
			return true
		}
	}
	return false
}

func (s *store) removeLocked(e *entry) {
	delete(s.entries, e.key)
	s.lru.Remove(e.elem)
	if e.file != "" {
		s.disk -= e.size
		os.Remove(e.file) // an open reader keeps reading the unlinked file
	} else {
		s.mem -= e.size
	}
}

// get is the live entry of key, marked most recently used; an expired one is dropped.
func (s *store) get(key string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		return nil
	}
	if !s.o.Now().Before(e.expires) {
		s.removeLocked(e)
		return nil
	}
	s.lru.MoveToFront(e.elem)
	return e
}

// open opens e's body; the caller closes it.
func (e *entry) open() (io.ReadSeekCloser, error) {
	if e.file == "" {
		return nopCloser{bytesReader(e.body)}, nil
	}
	return os.Open(e.file)
}

// remove drops key; false when there was no live entry.
func (s *store) remove(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		return false
	}
	live := s.o.Now().Before(e.expires)
	s.removeLocked(e)
	return live
}

// usage is the bytes held in memory and on disk.
func (s *store) usage() (mem, disk int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem, s.disk
}

// keyOf is the entry key of url in cache namespace ns ("" is caches.default).
func keyOf(ns, url string) string {
	h := sha256.Sum256([]byte(ns + "\x00" + url))
	return hex.EncodeToString(h[:])
}
