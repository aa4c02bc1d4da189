package backup

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"net/url"
	"os"

	"github.com/cespare/xxhash/v2"
)

// SQLite's WAL file (https://www.sqlite.org/fileformat.html#the_write_ahead_log): a
// 32-byte header (magic, version, page size, checkpoint sequence, salt-1, salt-2,
// checksums), then frames of a 24-byte header (page number, database size after a
// commit, salt-1, salt-2, checksums) and one page. A frame belongs to the current WAL
// only when its salts equal the header's; a restarted WAL gets new salts.
const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
	walIndexHeaderSize = 48
)

// walCursor is how far into one WAL a read has gone: frames before it are in the last
// shipped state. The zero cursor knows no WAL.
type walCursor struct {
	salt   [2]uint32
	frames int64
}

// walState reads the WAL of the database at path: its salts, how many frames of the
// current WAL it holds (valid: their salts match the header; a restarted WAL keeps the
// file's size and overwrites from the start, so frames of an older generation follow
// the valid ones) and how many of those end with a commit (committed: the cursor a
// read may resume from; frames of a transaction not yet committed are read again).
// hint, a cursor of the same WAL, skips the frames it already covers. ok is false
// without a WAL or with an unreadable one.
func walState(path string, hint walCursor) (c walCursor, valid int64, pageSize uint32, ok bool) {
	f, err := os.Open(path + "-wal")
	if err != nil {
		return c, 0, 0, false
	}
	defer f.Close()
	var hdr [walHeaderSize]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return c, 0, 0, false
	}
	if m := binary.BigEndian.Uint32(hdr[0:4]); m != 0x377f0682 && m != 0x377f0683 {
		return c, 0, 0, false
	}
	pageSize = binary.BigEndian.Uint32(hdr[8:12])
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 {
		return c, 0, 0, false
	}
	c.salt = [2]uint32{binary.BigEndian.Uint32(hdr[16:20]), binary.BigEndian.Uint32(hdr[20:24])}
	if hint.salt == c.salt {
		c.frames = hint.frames
	}
	var fh [walFrameHeaderSize]byte
	for valid = c.frames; ; valid++ {
		if _, err := f.ReadAt(fh[:], walHeaderSize+valid*int64(walFrameHeaderSize+pageSize)); err != nil {
			break
		}
		if binary.BigEndian.Uint32(fh[8:12]) != c.salt[0] || binary.BigEndian.Uint32(fh[12:16]) != c.salt[1] {
			break
		}
		if binary.BigEndian.Uint32(fh[4:8]) != 0 {
			c.frames = valid + 1
		}
	}
	return c, valid, pageSize, true
}

// walMark reads the WAL index (the -shm file) of the database at path: the salts and
// the last committed frame of the WAL every reader starting now sees. A read
// transaction begun after it holds at least those frames; the WAL file alone does not
// tell that, since a writer appends a commit's frames before it publishes them in the
// index. The index holds two copies of its 48-byte header, the second written first;
// they differ while a writer is updating them. Its integers are in the machine's byte
// order; the salts are the WAL header's bytes.
// https://www.sqlite.org/walformat.html#the_wal_index_file_format
func walMark(path string) (walCursor, bool) {
	f, err := os.Open(path + "-shm")
	if err != nil {
		return walCursor{}, false
	}
	defer f.Close()
	var b [2 * walIndexHeaderSize]byte
	for range 100 {
		if _, err := f.ReadAt(b[:], 0); err != nil {
			return walCursor{}, false
		}
		h1, h2 := b[:walIndexHeaderSize], b[walIndexHeaderSize:]
		if string(h1) != string(h2) {
			continue
		}
		if h1[12] == 0 { // isInit
			return walCursor{}, false
		}
		return walCursor{
			salt:   [2]uint32{binary.BigEndian.Uint32(h1[32:36]), binary.BigEndian.Uint32(h1[36:40])},
			frames: int64(binary.NativeEndian.Uint32(h1[16:20])),
		}, true
	}
	return walCursor{}, false
}

// walSalts reads the salts of the WAL of the database at path.
func walSalts(path string) ([2]uint32, bool) {
	f, err := os.Open(path + "-wal")
	if err != nil {
		return [2]uint32{}, false
	}
	defer f.Close()
	var hdr [walHeaderSize]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return [2]uint32{}, false
	}
	return [2]uint32{binary.BigEndian.Uint32(hdr[16:20]), binary.BigEndian.Uint32(hdr[20:24])}, true
}

// walPages are the page numbers of the current WAL's frames from..to of the database at
// path (frames of an older WAL generation, past the current end, are left out).
func walPages(path string, salt [2]uint32, pageSize uint32, from, to int64) ([]uint32, error) {
	f, err := os.Open(path + "-wal")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[uint32]bool{}
	var out []uint32
	var fh [walFrameHeaderSize]byte
	for i := from; i < to; i++ {
		if _, err := f.ReadAt(fh[:], walHeaderSize+i*int64(walFrameHeaderSize+pageSize)); err != nil {
			return nil, err
		}
		if binary.BigEndian.Uint32(fh[8:12]) != salt[0] || binary.BigEndian.Uint32(fh[12:16]) != salt[1] {
			break
		}
		if no := binary.BigEndian.Uint32(fh[0:4]); !seen[no] {
			seen[no] = true
			out = append(out, no)
		}
	}
	return out, nil
}

// errNoGuide: the pages changed since the cursor cannot be told from the WAL (it was
// restarted, or there is none); every page must be read.
var errNoGuide = errors.New("the WAL does not tell which pages changed")

// readGuided reads, in one read transaction, only the pages the WAL frames after c
// name (every frame up to the snapshot included: the WAL is listed after the
// transaction took its snapshot), and returns them with old's hashes updated and the
// cursor of the next read: the WAL index's mark read before the transaction began,
// all of whose frames the snapshot holds. keep selects the pages returned.
// A database nobody has open is not opened (pinned): its pages are read from a copy.
func readGuided(ctx context.Context, path string, c walCursor, old []uint64, keep func(no uint32, h uint64) bool) (h header, pages []page, hashes []uint64, next walCursor, err error) {
	open, err := pinned(path, func() (err error) {
		h, pages, hashes, next, err = readGuidedOpen(ctx, path, c, old, keep)
		return err
	})
	if err == nil && !open {
		err = errNoGuide
	}
	return h, pages, hashes, next, err
}

func readGuidedOpen(ctx context.Context, path string, c walCursor, old []uint64, keep func(no uint32, h uint64) bool) (header, []page, []uint64, walCursor, error) {
	mark, ok := walMark(path)
	if !ok || c.salt == [2]uint32{} || mark.salt != c.salt || mark.frames < c.frames {
		return header{}, nil, nil, walCursor{}, errNoGuide
	}
	before, _, pageSize, ok := walState(path, c)
	if !ok || before.salt != c.salt {
		return header{}, nil, nil, walCursor{}, errNoGuide
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro&_pragma=busy_timeout(5000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return header{}, nil, nil, walCursor{}, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return header{}, nil, nil, walCursor{}, err
	}
	defer tx.Rollback()
	h := header{PageSize: pageSize}
	if err := tx.QueryRowContext(ctx, "PRAGMA page_count").Scan(&h.PageCount); err != nil {
		return h, nil, nil, walCursor{}, err
	}
	after, valid, _, ok := walState(path, before)
	if !ok || after.salt != c.salt {
		return h, nil, nil, walCursor{}, errNoGuide
	}
	nos, err := walPages(path, c.salt, pageSize, c.frames, valid)
	if err != nil {
		return h, nil, nil, walCursor{}, err
	}
	pages, hashes, err := readListed(ctx, tx, h.PageCount, nos, old, keep)
	if err != nil {
		return h, nil, nil, walCursor{}, err
	}
	// A snapshot read from the database file alone (the WAL was wholly checkpointed)
	// does not keep the writer from restarting the WAL, whose new frames overwrite the
	// ones listed: list and pages are whole only if the WAL kept its salts to the end.
	if salts, ok := walSalts(path); !ok || salts != c.salt {
		return h, nil, nil, walCursor{}, errNoGuide
	}
	return h, pages, hashes, mark, nil
}

// readListed reads the pages nos of the snapshot of tx and returns those keep selects
// with old's hashes updated.
func readListed(ctx context.Context, tx *sql.Tx, pageCount uint32, nos []uint32, old []uint64, keep func(no uint32, h uint64) bool) ([]page, []uint64, error) {
	hashes := make([]uint64, pageCount)
	copy(hashes, old)
	var pages []page
	for _, no := range nos {
		if no == 0 || no > pageCount {
			continue // a page beyond the snapshot's end: truncated away
		}
		p := page{No: no}
		if err := tx.QueryRowContext(ctx, "SELECT data FROM sqlite_dbpage WHERE pgno = ?", no).Scan(&p.Data); err != nil {
			return nil, nil, err
		}
		sum := xxhash.Sum64(p.Data)
		hashes[no-1] = sum
		if keep(no, sum) {
			pages = append(pages, p)
		}
	}
	for no := uint32(len(old)) + 1; no <= pageCount; no++ {
		if hashes[no-1] == 0 && !contains(nos, no) {
			return nil, nil, errNoGuide // a new page no frame names
		}
	}
	return pages, hashes, nil
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
