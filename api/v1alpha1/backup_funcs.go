package v1alpha1

import (
	"fmt"
	"strings"
	"time"
)

// Defaults of BackupSpec (docs/backup.md).
const (
	// DefaultBackupRetention is D1 Time Travel's window
	// (https://developers.cloudflare.com/d1/reference/time-travel/).
	DefaultBackupRetention        = 30 * 24 * time.Hour
	DefaultBackupSnapshotInterval = time.Hour
)

// DefaultBackupPath is a store's backup path when spec.backup.path is unset:
// "<namespace>/<plural>/<name>", plural the kind's resource (e.g. d1databases).
func DefaultBackupPath(namespace, plural, name string) string {
	return namespace + "/" + plural + "/" + name
}

// PathOr is b's path, or def when unset.
func (b *BackupSpec) PathOr(def string) string {
	if b.Path != "" {
		return b.Path
	}
	return def
}

// RetentionOrDefault is spec.backup.retention or DefaultBackupRetention.
func (b *BackupSpec) RetentionOrDefault() time.Duration {
	if b.Retention != nil {
		return b.Retention.Duration
	}
	return DefaultBackupRetention
}

// SnapshotIntervalOrDefault is spec.backup.snapshotInterval or its default.
func (b *BackupSpec) SnapshotIntervalOrDefault() time.Duration {
	if b.SnapshotInterval != nil {
		return b.SnapshotInterval.Duration
	}
	return DefaultBackupSnapshotInterval
}

// RestoreConflict explains why restore r cannot start a store whose own backup is b
// (at path when b.path is unset): r names that very backup, whose newest state a lost
// volume is restored from anyway, so r's point in time would never apply; "" when it
// does not.
func RestoreConflict(b *BackupSpec, r *RestoreSpec, defaultPath string) string {
	if b == nil || r == nil {
		return ""
	}
	same := strings.TrimSuffix(b.S3.Endpoint, "/") == strings.TrimSuffix(r.S3.Endpoint, "/") &&
		b.S3.Bucket == r.S3.Bucket && b.PathOr(defaultPath) == r.Path
	if !same {
		return ""
	}
	return fmt.Sprintf("names this store's own backup (spec.backup, path %q): a lost volume is restored from its newest state anyway; "+
		"to start from an earlier time, give spec.backup a new path (docs/backup.md, \"Start a store from a backup\")", r.Path)
}

// BackupPath is the namespace's backup path (spec.backup.path or its default); "" without spec.backup.
func (d *DurableObjectNamespace) BackupPath() string {
	return backupPath(d.Spec.Backup, d.Namespace, "durableobjectnamespaces", d.Name)
}

// BackupPathOf is the path of backup b of the namespace (b.path or its default).
func (d *DurableObjectNamespace) BackupPathOf(b *BackupSpec) string {
	return backupPath(b, d.Namespace, "durableobjectnamespaces", d.Name)
}

// BackupPath is the database's backup path; "" without spec.backup.
func (d *D1Database) BackupPath() string {
	return backupPath(d.Spec.Backup, d.Namespace, "d1databases", d.Name)
}

// BackupPath is the namespace's backup path; "" without spec.backup.
func (k *KVNamespace) BackupPath() string {
	return backupPath(k.Spec.Backup, k.Namespace, "kvnamespaces", k.Name)
}

// BackupPath is the queue's backup path; "" without spec.backup.
func (q *Queue) BackupPath() string {
	return backupPath(q.Spec.Backup, q.Namespace, "queues", q.Name)
}

// BackupPath is the engine's backup path; "" without spec.engine.backup.
func (w *Workflow) BackupPath() string {
	if w.Spec.Engine == nil {
		return ""
	}
	return backupPath(w.Spec.Engine.Backup, w.Namespace, "workflows", w.Name)
}

func backupPath(b *BackupSpec, namespace, plural, name string) string {
	if b == nil {
		return ""
	}
	return b.PathOr(DefaultBackupPath(namespace, plural, name))
}
