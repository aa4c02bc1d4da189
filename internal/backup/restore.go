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
	"strings"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/go-logr/logr"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Database is one database file kept in a backup.
type Database struct {
	// File is its path relative to a store's directory ("<uniqueKey>/<file>.sqlite").
	File string
	// key is its key prefix in the bucket.
	key string
}

// ltxKey matches a key of litestream's S3 layout: <database prefix>/<level, 4 hex
// digits>/<min TXID>-<max TXID>.ltx.
var ltxKey = regexp.MustCompile(`^(.+)/[0-9a-f]{4}/[0-9a-f]{16}-[0-9a-f]{16}\.ltx$`)

// List returns the databases of t that shard ordinal restores: every object's file
// and the shard's own metadata files. owns reports whether the shard owns an object
// (by its id); nil owns every object.
func List(ctx context.Context, t Target, ordinal int32, owns func(id string) bool) ([]Database, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	detachAWSEnvironment()
	mc, err := t.minio()
	if err != nil {
		return nil, err
	}
	seen := map[string]Database{}
	for _, prefix := range []string{t.Prefix + "/objects/", fmt.Sprintf("%s/shards/%d/", t.Prefix, ordinal)} {
		for o := range mc.ListObjects(ctx, t.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				return nil, fmt.Errorf("backup: list s3://%s/%s: %w", t.Bucket, prefix, o.Err)
			}
			m := ltxKey.FindStringSubmatch(o.Key)
			if m == nil {
				continue
			}
			key := m[1]
			file := strings.TrimPrefix(key, prefix)
			if _, ok := seen[file]; ok {
				continue
			}
			if prefix == t.Prefix+"/objects/" && owns != nil && !owns(ObjectID(path.Base(file))) {
				continue
			}
			seen[file] = Database{File: file, key: key}
		}
	}
	out := make([]Database, 0, len(seen))
	for _, d := range seen {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

// minio is a client for listing t's bucket (litestream's client lists one database).
func (t Target) minio() (*minio.Client, error) {
	u, err := url.Parse(t.Endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("backup target: endpoint %q is not a URL", t.Endpoint)
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

// RestoreOptions choose what Restore writes.
type RestoreOptions struct {
	// Ordinal and Owns select the databases (List).
	Ordinal int32
	Owns    func(id string) bool
	// PointInTime restores each database as it was then; zero restores the newest
	// shipped position.
	PointInTime time.Time
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
	n := 0
	for _, d := range dbs {
		err := restoreOne(ctx, t, d, filepath.Join(dir, filepath.FromSlash(d.File)), o.PointInTime, log)
		if errors.Is(err, errNothingBefore) {
			log.Info("backup: nothing shipped before the point in time; not restored", "file", d.File)
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

var errNothingBefore = errors.New("no backup before the point in time")

func restoreOne(ctx context.Context, t Target, d Database, dst string, at time.Time, log logr.Logger) error {
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("backup: restore %s: the file exists; restore never overwrites", d.File)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp := dst + ".restoring"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm", litestream.TXIDPath(tmp)} {
		_ = os.Remove(f)
	}
	client := t.client(d.key)
	if err := client.Init(ctx); err != nil {
		return err
	}
	r := litestream.NewReplicaWithClient(nil, client)
	opt := litestream.NewRestoreOptions()
	opt.OutputPath, opt.Timestamp = tmp, at
	opt.IntegrityCheck = litestream.IntegrityCheckQuick
	if err := r.Restore(ctx, opt); err != nil {
		if !at.IsZero() && (errors.Is(err, litestream.ErrTxNotAvailable) || errors.Is(err, litestream.ErrNoSnapshots)) {
			return errNothingBefore
		}
		return fmt.Errorf("backup: restore %s: %w", d.File, err)
	}
	_ = os.Remove(litestream.TXIDPath(tmp))
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	log.Info("backup: restored", "file", d.File, "pointInTime", at)
	return nil
}
