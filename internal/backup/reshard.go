package backup

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/minio/minio-go/v7"
)

// Reshard is a change of a Durable Object namespace's shard count (docs/scaling.md):
// the shard set that served under From stopped at Since, each of its pods shipping its
// last changes and then sealing (Seal); the new set restores what it now owns.
type Reshard struct {
	From  int32     `json:"from"`
	Since time.Time `json:"since"`
	// Unsealed are shards of the old set not waited for: their objects move as of
	// their last shipped state (the operator's unsealed-shards annotation).
	Unsealed []int32 `json:"unsealed,omitempty"`
}

// id names the reshard in the markers that make the step run once per pod.
func (r Reshard) id() string { return fmt.Sprintf("%d-%d", r.From, r.Since.UnixNano()) }

// ReshardMarker, in a store's directory, holds the id of the last reshard this
// volume went through.
const ReshardMarker = ".workerd-operator-reshard"

// MovedPrefix names the directory where a reshard moves the files of objects this
// shard no longer owns, or owned by another shard until now (never opened by workerd:
// Restore of the newest state replaces them).
const MovedPrefix = ".workerd-operator-moved-"

// sealKey is where shard ordinal records that it stopped with everything shipped.
func (t Target) sealKey(ordinal int32) string {
	return fmt.Sprintf("%s/shards/%d/sealed", t.Prefix, ordinal)
}

// reshardedKey records that shard ordinal went through reshard r (its volume may be
// lost later: the step must not run twice, its alarms are newer than the old set's).
func (t Target) reshardedKey(ordinal int32, r Reshard) string {
	return fmt.Sprintf("%s/shards/%d/resharded-%s", t.Prefix, ordinal, r.id())
}

// Seal records that this shard's pod stopped after its last pass: every write workerd
// acknowledged is in the bucket. Called by the sidecar on shutdown, after workerd
// exited (it is a native sidecar, stopped after the main containers).
func (r *Replicator) Seal(ctx context.Context) error {
	r.mu.Lock()
	lost := r.lost
	r.mu.Unlock()
	if lost {
		return errors.New("backup: no seal: the store's directory was wiped under the pod, so its last pass shipped nothing")
	}
	body := []byte(time.Now().UTC().Format(time.RFC3339Nano))
	_, err := r.mc.PutObject(ctx, r.opts.Bucket, r.opts.sealKey(r.opts.Ordinal), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	return err
}

// sealedAt is when shard ordinal last sealed (zero: never).
func sealedAt(ctx context.Context, mc *minio.Client, t Target, ordinal int32) (time.Time, error) {
	obj, err := mc.GetObject(ctx, t.Bucket, t.sealKey(ordinal), minio.GetObjectOptions{})
	if err != nil {
		return time.Time{}, err
	}
	defer obj.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(obj); err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return time.Time{}, nil
		}
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, strings.TrimSpace(b.String()))
}

// waitSeals waits until every shard of the old set sealed after r.Since: until then
// the newest state of an object that moves may still be on its old owner's volume.
func waitSeals(ctx context.Context, mc *minio.Client, t Target, r Reshard, log logr.Logger) error {
	for k := int32(0); k < r.From; k++ {
		if slices.Contains(r.Unsealed, k) {
			log.Info("backup: reshard: not waiting for this shard's seal (unsealed-shards): its objects move as of their last shipped state; writes it acknowledged after that are lost", "shard", k)
			continue
		}
		for n := 0; ; n++ {
			at, err := sealedAt(ctx, mc, t, k)
			if err == nil && !at.Before(r.Since) {
				break
			}
			if n%30 == 0 {
				log.Info("backup: reshard: waiting for a shard of the old set to stop with its last changes shipped (its seal)",
					"shard", k, "since", r.Since, "sealed", at, "error", errString(err))
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("reshard from %d shards: shard %d did not seal after %s (its pod did not stop cleanly with its last changes shipped; annotation fleet.workerd-operator.io/unsealed-shards lets the change go on without it, docs/scaling.md): %w", r.From, k, r.Since.Format(time.RFC3339), ctx.Err())
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// maybeReshard runs the reshard step unless this ordinal went through it already
// ("" then: the usual recovery applies).
func (o RecoverOptions) maybeReshard(ctx context.Context, log logr.Logger) (string, error) {
	if o.Backup == nil {
		return "", errNoBackup
	}
	if o.Owns == nil || o.OldOwner == nil {
		return "", errors.New("reshard: the shard's ownership under the old and new counts is required")
	}
	mc, err := o.Backup.minio()
	if err != nil {
		return "", err
	}
	done, err := o.reshardDone(ctx, mc)
	if err != nil || done {
		return "", err
	}
	return o.reshard(ctx, mc, log)
}

// reshardDone reports whether this pod's volume, or an earlier volume of its ordinal,
// went through r.
func (o RecoverOptions) reshardDone(ctx context.Context, mc *minio.Client) (bool, error) {
	if b, err := os.ReadFile(filepath.Join(o.Dir, ReshardMarker)); err == nil && strings.TrimSpace(string(b)) == o.Reshard.id() {
		return true, nil
	}
	t := o.Backup.Target
	_, err := mc.StatObject(ctx, t.Bucket, t.reshardedKey(o.Ordinal, *o.Reshard), minio.StatObjectOptions{})
	if err == nil {
		return true, nil
	}
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return false, nil
	}
	return false, err
}

// reshard makes this shard's volume hold what it owns under the new count: objects it
// no longer owns, or did not own until now, are moved aside; the objects it owns and
// lacks come from the backup's newest state (their old owner sealed it); its alarms
// (metadata.sqlite) become its own rows plus the rows of the objects moving in.
func (o RecoverOptions) reshard(ctx context.Context, mc *minio.Client, log logr.Logger) (string, error) {
	t := o.Backup.Target
	if err := waitSeals(ctx, mc, t, *o.Reshard, log); err != nil {
		return "", err
	}
	aside := filepath.Join(o.Dir, fmt.Sprintf("%s%d", MovedPrefix, time.Now().UnixNano()))
	out, err := o.moveObjectsAside(aside)
	if err != nil {
		return "", err
	}
	in, err := o.restoreMissing(ctx, mc, log)
	if err != nil {
		return "", err
	}
	if err := o.rebuildAlarms(ctx, mc); err != nil {
		return "", fmt.Errorf("reshard: alarms: %w", err)
	}
	if err := markVolume(o.Dir); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, ReshardMarker), []byte(o.Reshard.id()+"\n"), 0o600); err != nil {
		return "", err
	}
	if _, err := mc.PutObject(ctx, t.Bucket, t.reshardedKey(o.Ordinal, *o.Reshard), bytes.NewReader(nil), 0, minio.PutObjectOptions{}); err != nil {
		return "", err
	}
	kept := ""
	if out > 0 {
		kept = " (their files kept in " + aside + ")"
	}
	return fmt.Sprintf("resharded from %d shards: %d object(s) handed over%s, %d restored from the backup", o.Reshard.From, out, kept, in), nil
}

// moveAside of the objects a reshard takes from this volume: not owned any more, or
// owned by another shard until now (a stale copy from an earlier shape).
func (o RecoverOptions) moveObjectsAside(aside string) (int, error) {
	found, err := databaseFiles(o.Dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for rel := range found {
		if path.Base(rel) == MetadataFile {
			continue
		}
		id := ObjectID(path.Base(rel))
		if o.Owns(id) && o.ownedBefore(id) {
			continue
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			src := filepath.Join(o.Dir, filepath.FromSlash(rel)+suffix)
			if !exists(src) {
				continue
			}
			dst := filepath.Join(aside, filepath.FromSlash(rel)+suffix)
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				return n, err
			}
			if err := os.Rename(src, dst); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
}

// restoreMissing restores, as of their newest state, the objects this shard owns and
// has no file of (moved in, or lost with an earlier volume).
func (o RecoverOptions) restoreMissing(ctx context.Context, mc *minio.Client, log logr.Logger) (int, error) {
	t := o.Backup.Target
	dbs, err := List(ctx, t, o.Ordinal, o.Owns)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range dbs {
		dst := filepath.Join(o.Dir, filepath.FromSlash(d.File))
		if path.Base(d.File) == MetadataFile || exists(dst) {
			continue
		}
		plan := d.plan(time.Time{})
		if plan == nil {
			continue // deleted (deleteAll) by its last owner
		}
		if err := restoreOne(ctx, mc, t.Bucket, plan, dst); err != nil {
			return n, fmt.Errorf("reshard: restore %s: %w", d.File, err)
		}
		n++
	}
	log.Info("backup: reshard: objects restored", "count", n)
	return n, nil
}

// alarmRow is a row of workerd's _cf_ALARM table (alarm-scheduler.c++): one pending
// alarm of an object, kept by the namespace's scheduler in metadata.sqlite.
type alarmRow struct {
	id   string
	at   int64
	name sql.NullString
}

// ownedBefore: this shard owned id under the old count.
func (o RecoverOptions) ownedBefore(id string) bool { return o.OldOwner(id) == o.Ordinal }

// rebuildAlarms makes this shard's alarm scheduler hold exactly the alarms of the
// objects it owns now, each as its old owner sealed it (this shard's own rows
// included: its volume may be new). Rows of another shape, left on a volume kept
// from an earlier count, are dropped.
func (o RecoverOptions) rebuildAlarms(ctx context.Context, mc *minio.Client) error {
	rows, err := o.oldAlarms(ctx, mc)
	if err != nil {
		return err
	}
	if err := o.pendingAlarms(rows); err != nil {
		return err
	}
	for uk := range o.localKeys() {
		if _, ok := rows[uk]; !ok {
			rows[uk] = nil
		}
	}
	for uk, list := range rows {
		if err := writeAlarms(filepath.Join(o.Dir, uk, MetadataFile), list); err != nil {
			return err
		}
	}
	return nil
}

// pendingAlarms adds to rows the alarm each object this shard owns holds in its own
// database (_cf_METADATA key 1, workerd's sqlite-metadata.c++: the alarm the object
// set, committed with its storage) when no scheduler row has it: a scheduler loses
// the row of an alarm that was running when its workerd was killed (a shard stopping
// for a move), while the object still holds the alarm.
func (o RecoverOptions) pendingAlarms(rows map[string][]alarmRow) error {
	found, err := databaseFiles(o.Dir)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, list := range rows {
		for _, r := range list {
			have[r.id] = true
		}
	}
	for rel := range found {
		id := ObjectID(path.Base(rel))
		if path.Base(rel) == MetadataFile || have[id] || !o.Owns(id) {
			continue
		}
		at, ok, err := objectAlarm(filepath.Join(o.Dir, filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if ok {
			uk := path.Dir(rel)
			rows[uk] = append(rows[uk], alarmRow{id: id, at: at})
		}
	}
	return nil
}

// objectAlarm reads the alarm an object's database holds (ns since the epoch).
func objectAlarm(file string) (int64, bool, error) {
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		return 0, false, err
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_cf_METADATA'`).Scan(&n); err != nil || n == 0 {
		return 0, false, err
	}
	var at sql.NullInt64
	err = db.QueryRow(`SELECT value FROM _cf_METADATA WHERE key = 1`).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return at.Int64, err == nil && at.Valid, err
}

// localKeys are the uniqueKey directories of the volume that hold a metadata file.
func (o RecoverOptions) localKeys() map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(o.Dir)
	for _, e := range entries {
		if e.IsDir() && exists(filepath.Join(o.Dir, e.Name(), MetadataFile)) {
			out[e.Name()] = true
		}
	}
	return out
}

// oldAlarms reads, by uniqueKey, the rows of the old set's sealed schedulers for the
// objects this shard owns now, each from the shard that owned it then.
func (o RecoverOptions) oldAlarms(ctx context.Context, mc *minio.Client) (map[string][]alarmRow, error) {
	t := o.Backup.Target
	out := map[string][]alarmRow{}
	tmp, err := os.MkdirTemp(o.Dir, ".workerd-operator-alarms-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	for k := int32(0); k < o.Reshard.From; k++ {
		prefix := fmt.Sprintf("%s/shards/%d/", t.Prefix, k)
		files, err := listFiles(ctx, mc, t.Bucket, prefix)
		if err != nil {
			return nil, err
		}
		for key, fs := range files {
			file := key[len(prefix):]
			plan := Database{File: file, files: fs}.plan(time.Time{})
			if path.Base(file) != MetadataFile || plan == nil {
				continue
			}
			dst := filepath.Join(tmp, fmt.Sprint(k), filepath.FromSlash(file))
			if err := restoreOne(ctx, mc, t.Bucket, plan, dst); err != nil {
				return nil, fmt.Errorf("shard %d's %s: %w", k, file, err)
			}
			rows, err := readAlarms(dst)
			if err != nil {
				return nil, fmt.Errorf("shard %d's %s: %w", k, file, err)
			}
			uk := path.Dir(file)
			for _, r := range rows {
				if o.Owns(r.id) && o.OldOwner(r.id) == k {
					out[uk] = append(out[uk], r)
				}
			}
		}
	}
	return out, nil
}

func readAlarms(file string) ([]alarmRow, error) {
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rs, err := db.Query(`SELECT actor_id, scheduled_time, actor_name FROM _cf_ALARM`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []alarmRow
	for rs.Next() {
		var r alarmRow
		if err := rs.Scan(&r.id, &r.at, &r.name); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// writeAlarms makes file's alarm table hold exactly rows. The table is created as
// workerd creates it (alarm-scheduler.c++), so workerd finds it as its own.
func writeAlarms(file string, rows []alarmRow) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=journal_mode(wal)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS _cf_ALARM (actor_id TEXT PRIMARY KEY, scheduled_time INTEGER, actor_name TEXT) WITHOUT ROWID`); err != nil {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(`DELETE FROM _cf_ALARM`); err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := tx.Exec(`INSERT OR REPLACE INTO _cf_ALARM (actor_id, scheduled_time, actor_name) VALUES (?, ?, ?)`, r.id, r.at, r.name); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// errNoBackup: a reshard reads the old set's last state from the store's own backup.
var errNoBackup = errors.New("a reshard moves objects through the store's backup: spec.backup is required (docs/scaling.md)")
