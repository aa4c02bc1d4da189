package backup

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// A backup file holds pages of one database, zstd-compressed: a full file every page
// of one consistent state, a delta file the pages that changed since the previous
// file of the same database. Both end the database at PageCount pages.
//
//	magic "WOPAGES1" | page size u32 | page count u32 | records: pgno u32, page
const fileMagic = "WOPAGES1"

// header opens every backup file.
type header struct {
	PageSize, PageCount uint32
}

// page is one database page.
type page struct {
	No   uint32
	Data []byte
}

// encodeFile writes h and pages, compressed, to w.
func encodeFile(w io.Writer, h header, pages []page) error {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(zw, 1<<16)
	bw.WriteString(fileMagic)
	_ = binary.Write(bw, binary.BigEndian, h)
	for _, p := range pages {
		if uint32(len(p.Data)) != h.PageSize {
			return fmt.Errorf("page %d holds %d bytes, want %d", p.No, len(p.Data), h.PageSize)
		}
		_ = binary.Write(bw, binary.BigEndian, p.No)
		bw.Write(p.Data)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// applyFile writes the pages of the backup file r into the database file f and
// truncates it to the file's page count.
func applyFile(f *os.File, r io.Reader) error {
	zr, err := zstd.NewReader(r)
	if err != nil {
		return err
	}
	defer zr.Close()
	br := bufio.NewReaderSize(zr, 1<<16)
	magic := make([]byte, len(fileMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != fileMagic {
		return fmt.Errorf("not a backup file (magic %q): %v", magic, err)
	}
	var h header
	if err := binary.Read(br, binary.BigEndian, &h); err != nil {
		return err
	}
	if h.PageSize < 512 || h.PageSize > 65536 || h.PageSize&(h.PageSize-1) != 0 {
		return fmt.Errorf("backup file: page size %d", h.PageSize)
	}
	buf := make([]byte, h.PageSize)
	for {
		var no uint32
		if err := binary.Read(br, binary.BigEndian, &no); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		if no == 0 || no > h.PageCount {
			return fmt.Errorf("backup file: page %d outside 1..%d", no, h.PageCount)
		}
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("backup file: page %d: %w", no, err)
		}
		if _, err := f.WriteAt(buf, int64(no-1)*int64(h.PageSize)); err != nil {
			return err
		}
	}
	return f.Truncate(int64(h.PageCount) * int64(h.PageSize))
}
