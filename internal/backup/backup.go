// Package backup ships a store's SQLite files continuously to an S3-compatible bucket
// and restores them, to the newest state or to a point in time (docs/backup.md).
//
// A store is workerd's localDisk directory of a shard or data-host pod:
// <dir>/<uniqueKey>/<object id>.sqlite, one file per Durable Object, and
// <dir>/<uniqueKey>/metadata.sqlite, the shard's alarms. Every second each file that
// changed is read in one read transaction (sqlite_dbpage) and the pages that differ
// from the last shipped state are uploaded as a delta; a full copy starts each chain.
// Nothing here writes to or locks the databases: workerd's SQLite has no busy
// handler, so a writer in another process (litestream checkpoints, for one) fails the
// Worker's own writes with SQLITE_BUSY.
//
// Keys in the bucket: an object's files live under <prefix>/objects/<uniqueKey>/<id>.sqlite/,
// whichever shard wrote them, so a shard restores the objects it owns under any shard
// count (render.ShardFor); a shard's metadata under
// <prefix>/shards/<ordinal>/<uniqueKey>/metadata.sqlite/. Each file is
// <label>.<full|delta|deleted>, label the Unix time in nanoseconds after its pages
// were read: a restore to time T applies the newest full at or before T and the
// deltas after it up to T.
package backup

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
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

// Identity names where t ships, without credentials (Status.Target): what one target
// holds is not in another.
func (t Target) Identity() string { return t.Endpoint + "/" + t.Bucket + "/" + t.Prefix }

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
		return t.shardKey(dir+"/"+file, ordinal), true
	}
	return fmt.Sprintf("%s/objects/%s/%s", t.Prefix, dir, file), true
}

// shardKey is the key prefix of a file of shard ordinal only (rel: its path relative
// to the store's directory).
func (t Target) shardKey(rel string, ordinal int32) string {
	return fmt.Sprintf("%s/shards/%d/%s", t.Prefix, ordinal, rel)
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
	// RequireMarker: Dir must hold VolumeMarker (written by Recover, the pod's init
	// container) for anything to be shipped; without it the directory is taken as
	// wiped and nothing is shipped, lest an emptied store become the newest backup.
	RequireMarker bool
	// Bolt are bbolt stores of this shard to ship too, by file name relative to Dir
	// (a Workflow engine's workflows.db); they restore to that name.
	Bolt map[string]*bolt.DB
	// BlobsDir, when set, is a directory of immutable blob files to ship too (a KV
	// host's values over 64 KiB).
	BlobsDir string
	// Retention is how far back a restore can go (default DefaultRetention).
	Retention time.Duration
	// SnapshotInterval is how often each database gets a full copy at most; deltas
	// in between (default DefaultSnapshotInterval). A full is also written once the
	// deltas since the last add up to half the database.
	SnapshotInterval time.Duration
	// ScanInterval is how often Dir is listed for new and removed files (default 1 s).
	ScanInterval time.Duration
	// Background: Start returns before the first pass, which runs at once in the
	// background. A pod's sidecar must not wait for it: after a restore (a moved or
	// lost volume) the first pass ships a full copy of every database, which can take
	// longer than the sidecar may take to start.
	Background bool
}

// Defaults.
const (
	// DefaultRetention is D1 Time Travel's window
	// (https://developers.cloudflare.com/d1/reference/time-travel/).
	DefaultRetention        = 30 * 24 * time.Hour
	DefaultSnapshotInterval = time.Hour
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
