package backup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// fileRE matches the key of a backup file: <database key>/<label>.<kind>.
var fileRE = regexp.MustCompile(`^(.+)/([0-9]{20})\.(full|delta|deleted)$`)

// backupFile is one backup file of a database.
type backupFile struct {
	key, kind string
	label     int64 // unix nanoseconds, after everything in it was read
}

// Database is one database file kept in a backup, with its backup files oldest first.
type Database struct {
	// File is its path relative to a store's directory ("<uniqueKey>/<file>.sqlite").
	File  string
	files []backupFile
}

// minio is an S3 client of t's server.
func (t Target) minio() (*minio.Client, error) {
	u, err := url.Parse(t.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("backup target: endpoint %q is not an http(s) URL", t.Endpoint)
	}
	region := t.Region
	if region == "" {
		region = DefaultRegion
	}
	return minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(t.AccessKeyID, t.SecretAccessKey, ""), Secure: u.Scheme == "https",
		Region: region, BucketLookup: minio.BucketLookupPath,
	})
}

// listFiles lists the backup files under prefix, grouped by database key, oldest first.
func listFiles(ctx context.Context, mc *minio.Client, bucket, prefix string) (map[string][]backupFile, error) {
	out := map[string][]backupFile{}
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("backup: list s3://%s/%s: %w", bucket, prefix, o.Err)
		}
		m := fileRE.FindStringSubmatch(o.Key)
		if m == nil {
			continue
		}
		label, _ := strconv.ParseInt(m[2], 10, 64)
		out[m[1]] = append(out[m[1]], backupFile{key: o.Key, kind: m[3], label: label})
	}
	for _, fs := range out {
		sort.Slice(fs, func(i, j int) bool { return fs[i].label < fs[j].label })
	}
	return out, nil
}

// filesOf lists the backup files of the database at key, oldest first.
func (r *Replicator) filesOf(ctx context.Context, key string) ([]backupFile, error) {
	m, err := listFiles(ctx, r.mc, r.opts.Bucket, key+"/")
	return m[key], err
}

// List returns the databases of t that shard ordinal restores: every object's file
// and the shard's own metadata files. owns reports whether the shard owns an object
// (by its id); nil owns every object.
func List(ctx context.Context, t Target, ordinal int32, owns func(id string) bool) ([]Database, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	mc, err := t.minio()
	if err != nil {
		return nil, err
	}
	var out []Database
	for _, prefix := range []string{t.Prefix + "/objects/", fmt.Sprintf("%s/shards/%d/", t.Prefix, ordinal)} {
		files, err := listFiles(ctx, mc, t.Bucket, prefix)
		if err != nil {
			return nil, err
		}
		for key, fs := range files {
			file := key[len(prefix):]
			if prefix == t.Prefix+"/objects/" && owns != nil && !owns(ObjectID(path.Base(file))) {
				continue
			}
			out = append(out, Database{File: file, files: fs})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

// plan is the files that rebuild d as of at (zero: the newest): the newest full at or
// before it and the deltas after that full up to it; nil when d did not exist then
// (nothing shipped before at, or removed).
func (d Database) plan(at time.Time) []backupFile {
	end := len(d.files)
	if !at.IsZero() {
		end = sort.Search(len(d.files), func(i int) bool { return d.files[i].label > at.UnixNano() })
	}
	start := -1
	for i := end - 1; i >= 0; i-- {
		if d.files[i].kind == kindDeleted {
			return nil
		}
		if d.files[i].kind == kindFull {
			start = i
			break
		}
	}
	if start < 0 {
		return nil
	}
	return d.files[start:end]
}

// RestoreOptions choose what Restore writes.
type RestoreOptions struct {
	// Ordinal and Owns select the databases (List).
	Ordinal int32
	Owns    func(id string) bool
	// PointInTime restores each database as it was then; zero restores the newest
	// shipped state.
	PointInTime time.Time
	// BlobsDir, when set, receives the store's blobs (Options.BlobsDir).
	BlobsDir string
}

// Restore writes the databases of t that o selects into dir, in workerd's layout, and
// returns how many it wrote. A file already in dir is an error: Restore never
// overwrites. Each file is written beside its final name and renamed into place once
// complete, so a crash leaves no partial database under a name workerd opens.
func Restore(ctx context.Context, t Target, dir string, o RestoreOptions, log logr.Logger) (int, error) {
	dbs, err := List(ctx, t, o.Ordinal, o.Owns)
	if err != nil {
		return 0, err
	}
	mc, err := t.minio()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range dbs {
		plan := d.plan(o.PointInTime)
		if plan == nil {
			log.Info("backup: no state of this database at the point in time; not restored", "file", d.File)
			continue
		}
		if err := restoreOne(ctx, mc, t.Bucket, plan, filepath.Join(dir, filepath.FromSlash(d.File))); err != nil {
			return n, fmt.Errorf("backup: restore %s: %w", d.File, err)
		}
		n++
	}
	if o.BlobsDir != "" {
		if _, err := restoreBlobs(ctx, mc, t, o.BlobsDir); err != nil {
			return n, fmt.Errorf("backup: restore blobs: %w", err)
		}
	}
	return n, nil
}

func restoreOne(ctx context.Context, mc *minio.Client, bucket string, plan []backupFile, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return errors.New("the file exists; restore never overwrites")
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp := dst + ".restoring"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	for _, bf := range plan {
		obj, err := mc.GetObject(ctx, bucket, bf.key, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		err = applyFile(f, obj)
		obj.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", bf.key, err)
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// thin removes the files of s's database that no restore within the retention can
// need: everything before the newest full at or before now − retention.
func (r *Replicator) thin(ctx context.Context, s *shipper) {
	files, err := r.filesOf(ctx, s.key)
	if err != nil {
		r.log.Error(err, "backup: list for retention", "file", s.rel)
		return
	}
	d := Database{files: files}
	keep := d.plan(time.Now().Add(-r.opts.Retention))
	if len(keep) == 0 {
		return
	}
	for _, f := range files {
		if f.label >= keep[0].label {
			break
		}
		if err := r.mc.RemoveObject(ctx, r.opts.Bucket, f.key, minio.RemoveObjectOptions{}); err != nil {
			r.log.Error(err, "backup: retention", "key", f.key)
			return
		}
	}
}
