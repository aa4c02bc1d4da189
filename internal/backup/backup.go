// Package backup ships a store's SQLite files continuously to an S3-compatible bucket
// and restores them, to the newest position or to a point in time (docs/backup.md).
//
// A store is workerd's localDisk directory of a shard or data-host pod:
// <dir>/<uniqueKey>/<object id>.sqlite, one file per Durable Object, and
// <dir>/<uniqueKey>/metadata.sqlite, the shard's alarms. Each file is one litestream
// database: litestream copies its WAL frames into LTX files, uploads them within a
// second of the commit, compacts them and takes snapshots, all without blocking the
// writer (it reads the WAL that workerd's SQLite writes, in another process).
//
// Keys in the bucket: an object's file lives under <prefix>/objects/<uniqueKey>/<id>.sqlite,
// whichever shard wrote it, so a shard restores the objects it owns under any shard
// count (render.ShardFor); a shard's metadata lives under
// <prefix>/shards/<ordinal>/<uniqueKey>/metadata.sqlite.
package backup

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/benbjohnson/litestream/s3"
)

// Target is a bucket and the key prefix of one store's backup in it.
type Target struct {
	// Endpoint is the S3 server's URL (http:// or https://, host, port).
	Endpoint string
	Bucket   string
	// Region signs the requests; "" is us-east-1.
	Region string
	// Prefix is the store's key prefix, without leading or trailing "/".
	Prefix                       string
	AccessKeyID, SecretAccessKey string
}

// DefaultRegion signs requests when Target.Region is empty.
const DefaultRegion = "us-east-1"

// MetadataFile is workerd's per-namespace file of a localDisk directory (alarms).
const MetadataFile = "metadata.sqlite"

// sqliteExt is the extension of every database file workerd writes there.
const sqliteExt = ".sqlite"

// Validate names the first missing field of t.
func (t Target) Validate() error {
	switch {
	case t.Endpoint == "":
		return fmt.Errorf("backup target: endpoint is empty")
	case t.Bucket == "":
		return fmt.Errorf("backup target: bucket is empty")
	case t.Prefix == "" || strings.HasPrefix(t.Prefix, "/") || strings.HasSuffix(t.Prefix, "/"):
		return fmt.Errorf("backup target: prefix %q must be non-empty, without a leading or trailing /", t.Prefix)
	case t.AccessKeyID == "" || t.SecretAccessKey == "":
		return fmt.Errorf("backup target: the access key id and secret access key are required")
	}
	return nil
}

// client is litestream's S3 replica client for the database whose keys start at key.
func (t Target) client(key string) *s3.ReplicaClient {
	c := s3.NewReplicaClient()
	c.Endpoint, c.Bucket, c.Path = t.Endpoint, t.Bucket, key
	c.Region = t.Region
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	c.AccessKeyID, c.SecretAccessKey = t.AccessKeyID, t.SecretAccessKey
	// Self-hosted S3 servers (versitygw, MinIO, Ceph) address buckets by path.
	c.ForcePathStyle = true
	return c
}

// keyOf is the key prefix of the database at rel (a path relative to the store's
// directory: "<uniqueKey>/<file>.sqlite") written by shard ordinal; ok is false for
// a file that is not a database of workerd's layout.
func (t Target) keyOf(rel string, ordinal int32) (key string, ok bool) {
	rel = filepath.ToSlash(rel)
	dir, file := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" || strings.Contains(dir, "/") || !strings.HasSuffix(file, sqliteExt) || len(file) == len(sqliteExt) {
		return "", false
	}
	if file == MetadataFile {
		return fmt.Sprintf("%s/shards/%d/%s/%s", t.Prefix, ordinal, dir, file), true
	}
	return fmt.Sprintf("%s/objects/%s/%s", t.Prefix, dir, file), true
}

// ObjectID is the Durable Object id of an object's database file name ("<id>.sqlite").
func ObjectID(file string) string { return strings.TrimSuffix(file, sqliteExt) }

// Options of a Replicator.
type Options struct {
	Target
	// Dir is the store's directory (workerd's localDisk path).
	Dir string
	// StateDir keeps litestream's local state (LTX files not yet compacted, positions)
	// on the same volume as Dir, outside it: workerd must not see it.
	StateDir string
	// Ordinal is the shard's ordinal (0 for a data host).
	Ordinal int32
	// Retention is how far back a restore can go (default DefaultRetention).
	Retention time.Duration
	// SnapshotInterval is how often each database is snapshotted (default
	// DefaultSnapshotInterval).
	SnapshotInterval time.Duration
	// ScanInterval is how often Dir is listed for new and removed files (default 1 s).
	ScanInterval time.Duration
}

// Defaults.
const (
	// DefaultRetention is D1 Time Travel's window
	// (https://developers.cloudflare.com/d1/reference/time-travel/).
	DefaultRetention        = 30 * 24 * time.Hour
	DefaultSnapshotInterval = 24 * time.Hour
	defaultScanInterval     = time.Second
)

func (o *Options) defaults() {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.SnapshotInterval <= 0 {
		o.SnapshotInterval = DefaultSnapshotInterval
	}
	if o.ScanInterval <= 0 {
		o.ScanInterval = defaultScanInterval
	}
}

// detachAWSEnvironment drops AWS_CA_BUNDLE from the process: the AWS SDK under
// litestream refuses it together with litestream's own HTTP client, and a backup's
// trust comes from its Target, never from the environment a process happens to have.
func detachAWSEnvironment() { _ = os.Unsetenv("AWS_CA_BUNDLE") }
