package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/minio/minio-go/v7"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// Kinds of backup file (the key's extension).
const (
	kindFull    = "full"
	kindDelta   = "delta"
	kindDeleted = "deleted"
)

// fileStat is what tells a database file changed without reading it: every commit
// appends to the WAL, every checkpoint writes the main file.
type fileStat struct {
	dbSize, walSize int64
	dbMod, walMod   time.Time
}

// mtimeGrain bounds how coarse a file's modification time is (the kernel stamps it
// from a clock that advances once per tick) and how far it may lag the wall clock.
const mtimeGrain = time.Second

// settledBefore tells the file was last written well before t: a stat equal to one
// taken at t then proves nothing changed. A commit in the same tick as that stat keeps
// the time, and a restarted WAL its size.
func (s fileStat) settledBefore(t time.Time) bool {
	return s.dbMod.Before(t.Add(-mtimeGrain)) && (s.walMod.IsZero() || s.walMod.Before(t.Add(-mtimeGrain)))
}

func statOf(path string) (fileStat, error) {
	db, err := os.Stat(path)
	if err != nil {
		return fileStat{}, err
	}
	s := fileStat{dbSize: db.Size(), dbMod: db.ModTime()}
	if wal, err := os.Stat(path + "-wal"); err == nil {
		s.walSize, s.walMod = wal.Size(), wal.ModTime()
	}
	return s, nil
}

// shipper ships one database file: a full file first, then a delta of the pages that
// changed each time the file changes, a full again once the deltas since the last
// add up to half the database or fullEvery passed.
type shipper struct {
	rel, path, key string
	// read and stat read the pages and tell a change: of the SQLite file at path
	// (readPages, statOf) or of a bbolt store (boltSource).
	read  func(ctx context.Context, keep func(no uint32, h uint64) bool) (header, []page, []uint64, error)
	statf func() (fileStat, error)

	// guided: a SQLite file, whose WAL names the pages each commit wrote; cursor is
	// how far into it the pages last shipped go (readGuided).
	guided bool
	cursor walCursor

	hashes    []uint64  // of the pages last shipped; nil before the first full
	stat      fileStat  // when last shipped
	statAt    time.Time // when stat was taken
	label     int64     // of the last file shipped: labels of one database only grow
	labelInit bool      // label was read from the bucket
	fullAt    time.Time
	deltaSum  int64 // bytes of pages in deltas since the last full
	// shipped (unix nanoseconds) and pending are read by Positions during a ship.
	shipped atomic.Int64
	full    atomic.Int64 // unix nanoseconds of the last full
	pending atomic.Bool
}

// sqliteShipper ships the SQLite file at path (rel under the store's directory).
// tmp is where copies of a database nobody has open are read (readQuiet).
func sqliteShipper(rel, path, key, tmp string) *shipper {
	return &shipper{rel: rel, path: path, key: key, guided: true,
		read: func(ctx context.Context, keep func(uint32, uint64) bool) (header, []page, []uint64, error) {
			return readPages(ctx, path, tmp, keep)
		},
		statf: func() (fileStat, error) { return statOf(path) },
	}
}

// readPages reads every page of the database at path in one consistent state and
// returns the page size and the pages for which keep(pgno, hash) is true, with every
// page's hash. A file without a WAL (workerd closed it: the WAL was checkpointed and
// removed) is read as it lies; an open one in one read transaction of a read-only
// connection: a WAL reader never blocks the writer, and a file opened read-only can
// never be locked for writing. One with a WAL that nobody has open is read from a
// copy (readQuiet), made again if the database was opened meanwhile.
func readPages(ctx context.Context, path, tmp string, keep func(no uint32, h uint64) bool) (header, []page, []uint64, error) {
	if h, pages, hashes, ok, err := readClosed(path, keep); ok || err != nil {
		return h, pages, hashes, err
	}
	for attempt := 1; ; attempt++ {
		var h header
		var pages []page
		var hashes []uint64
		open, err := pinned(path, func() (err error) {
			h, pages, hashes, err = readOpen(ctx, path, keep)
			return err
		})
		if open || err != nil {
			return h, pages, hashes, err
		}
		h, pages, hashes, err = readQuiet(ctx, path, tmp, keep)
		if !errors.Is(err, errNotQuiet) || attempt == wholeReadAttempts {
			return h, pages, hashes, err
		}
	}
}

// readClosed reads a database file that has no WAL, page by page, and reports ok
// when nothing changed meanwhile (same size and time, still no WAL).
func readClosed(path string, keep func(no uint32, h uint64) bool) (h header, pages []page, hashes []uint64, ok bool, err error) {
	before, err := statOf(path)
	if err != nil || before.walSize > 0 || exists(path+"-wal") {
		return h, nil, nil, false, nil
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 100 {
		return h, nil, nil, false, nil
	}
	h.PageSize = uint32(b[16])<<8 | uint32(b[17])
	if h.PageSize == 1 {
		h.PageSize = 65536
	}
	if h.PageSize < 512 || len(b)%int(h.PageSize) != 0 {
		return h, nil, nil, false, nil
	}
	for off := 0; off < len(b); off += int(h.PageSize) {
		p := page{No: uint32(off/int(h.PageSize)) + 1, Data: b[off : off+int(h.PageSize)]}
		sum := xxhash.Sum64(p.Data)
		hashes = append(hashes, sum)
		if keep(p.No, sum) {
			pages = append(pages, p)
		}
	}
	h.PageCount = uint32(len(hashes))
	after, err := statOf(path)
	if err != nil || after != before || exists(path+"-wal") {
		return h, nil, nil, false, nil
	}
	return h, pages, hashes, true, nil
}

// readOpen reads the database in one read transaction of a read-only connection.
func readOpen(ctx context.Context, path string, keep func(no uint32, h uint64) bool) (header, []page, []uint64, error) {
	u := url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro&_pragma=busy_timeout(5000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return header{}, nil, nil, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return header{}, nil, nil, err
	}
	defer tx.Rollback()
	var h header
	if err := tx.QueryRowContext(ctx, "PRAGMA page_size").Scan(&h.PageSize); err != nil {
		return h, nil, nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT pgno, data FROM sqlite_dbpage ORDER BY pgno")
	if err != nil {
		return h, nil, nil, err
	}
	defer rows.Close()
	var pages []page
	var hashes []uint64
	for rows.Next() {
		var p page
		if err := rows.Scan(&p.No, &p.Data); err != nil {
			return h, nil, nil, err
		}
		sum := xxhash.Sum64(p.Data)
		hashes = append(hashes, sum)
		if keep(p.No, sum) {
			pages = append(pages, p)
		}
	}
	h.PageCount = uint32(len(hashes))
	return h, pages, hashes, rows.Err()
}

// errGone: the database file is no longer there.
var errGone = errors.New("database file removed")

// ship uploads what changed in the file since the last ship. force reads the pages
// even when the file's size and times did not change.
func (s *shipper) ship(ctx context.Context, r *Replicator, force bool) error {
	st, err := s.statf()
	if errors.Is(err, fs.ErrNotExist) {
		return errGone
	}
	if err != nil {
		return err
	}
	if st == s.stat && s.hashes != nil && !force && st.settledBefore(s.statAt) {
		s.pending.Store(false)
		return nil
	}
	s.pending.Store(true)
	statAt := time.Now()
	full := s.hashes == nil || time.Since(s.fullAt) >= r.opts.SnapshotInterval
	old := s.hashes
	h, pages, hashes, cursor, err := s.readChanged(ctx, full, func(no uint32, sum uint64) bool {
		return full || int(no) > len(old) || old[no-1] != sum
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", s.rel, err)
	}
	if !full && len(pages) == 0 && int(h.PageCount) == len(old) {
		s.stat, s.statAt, s.cursor, s.hashes = st, statAt, cursor, hashes
		s.shipped.Store(time.Now().UnixNano())
		s.pending.Store(false)
		return nil
	}
	if !full && s.deltaSum+int64(len(pages))*int64(h.PageSize) > int64(h.PageCount)*int64(h.PageSize)/2 {
		full = true
		if h, pages, hashes, cursor, err = s.readChanged(ctx, true, func(uint32, uint64) bool { return true }); err != nil {
			return fmt.Errorf("read %s: %w", s.rel, err)
		}
	}
	if err := r.shipBlobs(ctx); err != nil {
		return err
	}
	kind := kindDelta
	if full {
		kind = kindFull
	}
	if err := s.upload(ctx, r, kind, func(f *os.File) error { return encodeFile(f, h, pages) }); err != nil {
		return err
	}
	s.hashes, s.stat, s.statAt, s.cursor = hashes, st, statAt, cursor
	s.pending.Store(false)
	if full {
		s.fullAt, s.deltaSum = time.Now(), 0
		s.full.Store(s.fullAt.UnixNano())
		r.thin(ctx, s)
	} else {
		s.deltaSum += int64(len(pages)) * int64(h.PageSize)
	}
	return nil
}

// readChanged reads what changed since the last ship: for a SQLite file with a WAL
// that tells, only the pages its new frames name; else every page. It returns the
// WAL cursor the next read starts from.
func (s *shipper) readChanged(ctx context.Context, full bool, keep func(uint32, uint64) bool) (header, []page, []uint64, walCursor, error) {
	if !s.guided {
		h, pages, hashes, err := s.read(ctx, keep)
		return h, pages, hashes, walCursor{}, err
	}
	if !full && s.hashes != nil {
		h, pages, hashes, next, err := readGuided(ctx, s.path, s.cursor, s.hashes, keep)
		if !errors.Is(err, errNoGuide) {
			return h, pages, hashes, next, err
		}
	}
	return s.readWhole(ctx, keep)
}

// readWhole reads every page and returns the WAL index's mark read before the read
// began: all its frames are in the snapshot read. A read during which the WAL was
// restarted is read again: without the locks SQLite's WAL readers take, the restart
// overwrites frames the read may have used.
func (s *shipper) readWhole(ctx context.Context, keep func(uint32, uint64) bool) (header, []page, []uint64, walCursor, error) {
	for attempt := 1; ; attempt++ {
		// The index of a database nobody has open may be ahead of what a copy of it
		// holds (frames it names were never synced before a crash): no cursor then.
		mark, ok := walMark(s.path)
		if !ok || !openElsewhere(s.path) {
			mark = walCursor{}
		}
		salts, _ := walSalts(s.path)
		h, pages, hashes, err := s.read(ctx, keep)
		if err != nil {
			return h, nil, nil, walCursor{}, err
		}
		if now, _ := walSalts(s.path); now == salts {
			return h, pages, hashes, mark, nil
		}
		if attempt == wholeReadAttempts {
			return h, nil, nil, walCursor{}, fmt.Errorf("the WAL was restarted during each of %d reads; the next pass reads again", attempt)
		}
	}
}

// wholeReadAttempts bounds the reads of readWhole under a WAL restarted again and again.
const wholeReadAttempts = 5

// upload writes a file of kind, labelled after everything in it was read, under the
// database's key.
func (s *shipper) upload(ctx context.Context, r *Replicator, kind string, write func(*os.File) error) error {
	if !s.labelInit {
		files, err := r.filesOf(ctx, s.key)
		if err != nil {
			return err
		}
		if n := len(files); n > 0 {
			s.label = files[n-1].label
		}
		s.labelInit = true
	}
	tmp, err := os.CreateTemp(r.opts.StateDir, "upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := write(tmp); err != nil {
		return err
	}
	size, err := tmp.Seek(0, 1)
	if err != nil {
		return err
	}
	if _, err := tmp.Seek(0, 0); err != nil {
		return err
	}
	label := max(time.Now().UnixNano(), s.label+1)
	key := fileKey(s.key, label, kind)
	if _, err := r.mc.PutObject(ctx, r.opts.Bucket, key, tmp, size, minio.PutObjectOptions{ContentType: "application/zstd"}); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	s.label = label
	s.shipped.Store(time.Now().UnixNano())
	r.shippedBytes.Add(size)
	return nil
}

// fileKey is the key of a backup file of the database at dbKey.
func fileKey(dbKey string, label int64, kind string) string {
	return fmt.Sprintf("%s/%020d.%s", dbKey, label, kind)
}
