package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
)

// blobShipper uploads the files of a directory of immutable blobs (KV values over
// 64 KiB: kv.js writes each once under a new name, then the row naming it). Blobs are
// shipped before any database pass that may name them, never deleted from the bucket
// (a restore to an earlier time may need them), and all restored: a blob no row names
// takes room, nothing else.
type blobShipper struct {
	dir, prefix string // prefix: <store prefix>/blobs/

	mu       sync.Mutex
	uploaded map[string]bool // relative path → in the bucket
}

// ship uploads the blobs not yet in the bucket (listing the bucket the first time).
func (b *blobShipper) ship(ctx context.Context, r *Replicator) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.uploaded == nil {
		up := map[string]bool{}
		for o := range r.mc.ListObjects(ctx, r.opts.Bucket, minio.ListObjectsOptions{Prefix: b.prefix, Recursive: true}) {
			if o.Err != nil {
				return fmt.Errorf("list blobs: %w", o.Err)
			}
			up[strings.TrimPrefix(o.Key, b.prefix)] = true
		}
		b.uploaded = up
	}
	return filepath.WalkDir(b.dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(b.dir, p)
		rel = filepath.ToSlash(rel)
		if b.uploaded[rel] {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the walk listed it
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := r.mc.PutObject(ctx, r.opts.Bucket, b.prefix+rel, f, info.Size(), minio.PutObjectOptions{}); err != nil {
			return fmt.Errorf("upload blob %s: %w", rel, err)
		}
		r.shippedBytes.Add(info.Size())
		b.uploaded[rel] = true
		return nil
	})
}

// blobsPrefix is where t keeps a store's blobs.
func (t Target) blobsPrefix() string { return t.Prefix + "/blobs/" }

// restoreBlobs downloads every blob of t into dir and returns how many.
func restoreBlobs(ctx context.Context, mc *minio.Client, t Target, dir string) (int, error) {
	n := 0
	for o := range mc.ListObjects(ctx, t.Bucket, minio.ListObjectsOptions{Prefix: t.blobsPrefix(), Recursive: true}) {
		if o.Err != nil {
			return n, fmt.Errorf("list blobs: %w", o.Err)
		}
		rel := strings.TrimPrefix(o.Key, t.blobsPrefix())
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return n, fmt.Errorf("blob key %q leaves the blobs directory", o.Key)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return n, err
		}
		if err := mc.FGetObject(ctx, t.Bucket, o.Key, dst, minio.GetObjectOptions{}); err != nil {
			return n, fmt.Errorf("blob %s: %w", rel, err)
		}
		n++
	}
	return n, nil
}
