package backup

import (
	"context"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
	bolt "go.etcd.io/bbolt"
)

// boltShipper ships a bbolt store as pages of its file: tx.WriteTo in a read
// transaction is a consistent copy (bbolt readers never block its writer), page by
// page; the transaction id tells a change.
func boltShipper(name, key string, db *bolt.DB) *shipper {
	return &shipper{rel: name, path: db.Path(), key: key,
		read: func(_ context.Context, keep func(uint32, uint64) bool) (header, []page, []uint64, error) {
			return readBolt(db, keep)
		},
		statf: func() (fileStat, error) {
			var st fileStat
			err := db.View(func(tx *bolt.Tx) error {
				st.dbSize, st.walSize = tx.Size(), int64(tx.ID())
				return nil
			})
			return st, err
		},
	}
}

func readBolt(db *bolt.DB, keep func(uint32, uint64) bool) (h header, pages []page, hashes []uint64, err error) {
	h.PageSize = uint32(db.Info().PageSize)
	err = db.View(func(tx *bolt.Tx) error {
		pr, pw := io.Pipe()
		go func() { _, err := tx.WriteTo(pw); pw.CloseWithError(err) }()
		defer pr.Close()
		for no := uint32(1); ; no++ {
			buf := make([]byte, h.PageSize)
			if _, err := io.ReadFull(pr, buf); err == io.EOF {
				return nil
			} else if err != nil {
				return fmt.Errorf("bbolt %s: page %d: %w", db.Path(), no, err)
			}
			sum := xxhash.Sum64(buf)
			hashes = append(hashes, sum)
			if keep(no, sum) {
				pages = append(pages, page{No: no, Data: buf})
			}
		}
	})
	h.PageCount = uint32(len(hashes))
	return h, pages, hashes, err
}
