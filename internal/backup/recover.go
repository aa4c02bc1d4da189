package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Files in a store's directory, next to workerd's <uniqueKey> directories (workerd
// opens only those): VolumeMarker says the volume was initialised (restored, or
// found empty with an empty backup); RestoringMarker says a restore is under way, so
// a restore that crashed is started again from an empty directory.
const (
	VolumeMarker    = ".workerd-operator-volume"
	RestoringMarker = ".workerd-operator-restoring"
	// MirroredMarker says the volume holds what the store's own backup (the target
	// named in the file) held for the pod when Recover filled it, or that it held
	// nothing and the volume started empty: the replicator started next reports
	// Restored until its first pass (which copies every database anew) completes.
	MirroredMarker = ".workerd-operator-mirrored"
)

// Source is a backup a store's volume can be filled from.
type Source struct {
	Target
	// PointInTime restores each database as it was then (zero: the newest position).
	PointInTime time.Time
}

// RecoverOptions describe the volume of one pod of a store.
type RecoverOptions struct {
	// Dir is the store's directory (workerd's localDisk path) on the pod's volume.
	Dir string
	// Ordinal is the pod's shard; Owns tells whether it owns an object id (nil: all).
	Ordinal int32
	Owns    func(id string) bool
	// Files are files of the shard directly in Dir (Options.Bolt: a Workflow engine's
	// workflows.db); one that exists makes the volume initialised.
	Files []string
	// BlobsDir receives the store's blobs (RestoreOptions.BlobsDir), when set.
	BlobsDir string
	// Backup is the store's own backup (spec.backup), Restore the backup it starts
	// from (spec.restore); either may be nil.
	Backup, Restore *Source
	// Reshard is the last change of the shard count (nil: none); OldOwner is the
	// shard that owned an object id under Reshard.From.
	Reshard  *Reshard
	OldOwner func(id string) int32
}

// Recover makes a pod's volume ready before workerd starts and says what it did. An
// initialised volume is left alone. An empty one is filled from the store's own
// backup when that holds this shard's data (the volume was lost), else from
// o.Restore (a new store starting from another's backup); with neither, it starts
// empty. An error means the volume may be missing data: the pod must not serve.
func Recover(ctx context.Context, o RecoverOptions, log logr.Logger) (string, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return "", err
	}
	if o.Reshard != nil {
		if what, err := o.maybeReshard(ctx, log); err != nil || what != "" {
			return what, err
		}
	}
	if exists(filepath.Join(o.Dir, VolumeMarker)) {
		return "the volume is initialised; nothing to restore", nil
	}
	if exists(filepath.Join(o.Dir, RestoringMarker)) {
		log.Info("backup: an earlier restore did not finish; starting it again from an empty directory", "dir", o.Dir)
		if err := emptyDir(o.Dir); err != nil {
			return "", err
		}
	} else if found, err := databaseFiles(o.Dir); err != nil {
		return "", err
	} else if n := len(found) + o.present(); n > 0 {
		return o.unmarked(ctx, n, log)
	}
	src, what, err := o.source(ctx)
	if err != nil || src == nil {
		if err == nil {
			return "no backup holds data for this pod: the store starts empty", o.markMirrored(nil)
		}
		return "", err
	}
	if err := touch(filepath.Join(o.Dir, RestoringMarker)); err != nil {
		return "", err
	}
	n, err := Restore(ctx, src.Target, o.Dir, RestoreOptions{Ordinal: o.Ordinal, Owns: o.Owns, PointInTime: src.PointInTime, BlobsDir: o.BlobsDir}, log)
	if err != nil {
		return "", fmt.Errorf("restore from %s (s3 %s/%s/%s): %w", what, src.Endpoint, src.Bucket, src.Prefix, err)
	}
	if err := o.markMirrored(src); err != nil {
		return "", err
	}
	return fmt.Sprintf("restored %d database(s) from %s (s3 %s/%s/%s)", n, what, src.Endpoint, src.Bucket, src.Prefix), os.Remove(filepath.Join(o.Dir, RestoringMarker))
}

// unmarked decides for a volume holding n databases but no marker. With a backup that
// holds nothing for this pod, the databases predate the backup: they are kept. With one
// that holds data, the directory was wiped under a running workerd, which wrote anew:
// those files are moved aside (kept for inspection) and the backup is restored.
func (o RecoverOptions) unmarked(ctx context.Context, n int, log logr.Logger) (string, error) {
	src, _, err := o.source(ctx)
	if err != nil {
		return "", err
	}
	if src != o.Backup || src == nil {
		return fmt.Sprintf("the volume holds %d database(s) from before its backup was set up; kept", n), markVolume(o.Dir)
	}
	aside := filepath.Join(o.Dir, fmt.Sprintf("%s%d", LostPrefix, time.Now().Unix()))
	if err := moveAside(o.Dir, aside); err != nil {
		return "", err
	}
	log.Info("backup: the volume lost its marker while its backup holds data (its directory was wiped under a running pod): its files moved aside, restoring", "aside", aside)
	return Recover(ctx, o, log)
}

// LostPrefix names the directory, in a store's directory, where Recover moves files
// written after the directory was wiped (workerd never opens it: no .sqlite inside a
// uniqueKey directory of that name is routed to).
const LostPrefix = ".workerd-operator-lost-"

// moveAside moves every entry of dir except earlier LostPrefix directories into aside.
func moveAside(dir, aside string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(aside, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), LostPrefix) {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// source picks the backup an empty volume is filled from: the store's own when it
// holds this pod's data, else spec.restore's; nil when neither applies.
func (o RecoverOptions) source(ctx context.Context) (*Source, string, error) {
	if o.Backup != nil {
		dbs, err := List(ctx, o.Backup.Target, o.Ordinal, o.Owns)
		if err != nil {
			return nil, "", fmt.Errorf("list the store's backup (a pod must not start empty when its backup may hold data): %w", err)
		}
		if len(dbs) > 0 {
			return o.Backup, "the store's backup (spec.backup)", nil
		}
	}
	if o.Restore != nil {
		return o.Restore, "spec.restore", nil
	}
	return nil, "", nil
}

// present counts o.Files that exist in o.Dir.
func (o RecoverOptions) present() int {
	n := 0
	for _, f := range o.Files {
		if exists(filepath.Join(o.Dir, f)) {
			n++
		}
	}
	return n
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func touch(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// markMirrored marks the volume initialised, and mirrored when it was filled from the
// store's own backup (src) or started empty with one.
func (o RecoverOptions) markMirrored(src *Source) error {
	if o.Backup != nil && (src == nil || src == o.Backup) {
		if err := os.WriteFile(filepath.Join(o.Dir, MirroredMarker), []byte(o.Backup.Identity()), 0o600); err != nil {
			return err
		}
	}
	return markVolume(o.Dir)
}

// markVolume writes VolumeMarker durably (the file and its directory entry).
func markVolume(dir string) error {
	if err := touch(filepath.Join(dir, VolumeMarker)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// emptyDir removes everything in dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
