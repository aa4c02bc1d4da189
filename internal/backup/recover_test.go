package backup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// seed writes v into key k of each object through workerd, ships the store to tg as
// shard 0 and returns the database files it wrote.
func seed(t *testing.T, tg backup.Target, v string, objects ...string) []string {
	t.Helper()
	ctx := context.Background()
	data := t.TempDir()
	w := startWorkerd(t, data)
	for _, o := range objects {
		w.call(t, fmt.Sprintf("/put?obj=%s&k=k&v=%s", o, v))
	}
	r, err := backup.Start(ctx, backup.Options{Target: tg, Dir: data, StateDir: t.TempDir()}, testr.New(t))
	must(t, err)
	waitShipped(t, r, len(objects)+2) // the objects, startWorkerd's probe, metadata.sqlite
	must(t, r.Close(ctx))
	w.stop()
	return dbFiles(t, data)
}

// dbFiles lists the database files under dir, relative to it.
func dbFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*", "*.sqlite"))
	must(t, err)
	for i := range m {
		m[i], _ = filepath.Rel(dir, m[i])
	}
	slices.Sort(m)
	return m
}

func recoverInto(t *testing.T, o backup.RecoverOptions) (string, error) {
	t.Helper()
	return backup.Recover(context.Background(), o, testr.New(t))
}

// TestRecoverFillsALostVolume: an empty volume of a store whose backup holds data is
// restored before workerd starts, once; a volume already initialised is left alone
// even when it is empty (its objects were deleted by the user, not lost).
func TestRecoverFillsALostVolume(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/kv/sessions")
	files := seed(t, tg, "v1", "a", "b", "c")
	dir := t.TempDir()
	what, err := recoverInto(t, backup.RecoverOptions{Dir: dir, Backup: &backup.Source{Target: tg}})
	must(t, err)
	if got := dbFiles(t, dir); !slices.Equal(got, files) {
		t.Errorf("restored %v, want %v (%s)", got, files, what)
	}
	w := startWorkerd(t, dir)
	if got := w.call(t, "/get?obj=b&k=k"); got != "v1" {
		t.Errorf("object b after recovery: %q, want v1", got)
	}
	w.stop()
	for _, f := range files {
		must(t, os.Remove(filepath.Join(dir, f)))
	}
	what, err = recoverInto(t, backup.RecoverOptions{Dir: dir, Backup: &backup.Source{Target: tg}})
	must(t, err)
	if got := dbFiles(t, dir); len(got) != 0 {
		t.Errorf("an initialised volume was restored again: %v (%s)", got, what)
	}
}

// TestRecoverByShard: each shard of a two-shard store restores exactly the objects
// render.ShardFor gives it, so the shards together hold every object once.
func TestRecoverByShard(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/dons/rooms")
	var objects []string
	for i := range 12 {
		objects = append(objects, fmt.Sprintf("room-%d", i))
	}
	files := seed(t, tg, "v", objects...)
	var union []string
	for ordinal := range int32(2) {
		dir := t.TempDir()
		owns := func(id string) bool { s, _ := render.ShardFor(id, 2); return s == ordinal }
		_, err := recoverInto(t, backup.RecoverOptions{Dir: dir, Ordinal: ordinal, Owns: owns, Backup: &backup.Source{Target: tg}})
		must(t, err)
		for _, f := range dbFiles(t, dir) {
			id := backup.ObjectID(filepath.Base(f))
			if filepath.Base(f) != backup.MetadataFile && !owns(id) {
				t.Errorf("shard %d restored %s, owned by the other shard", ordinal, f)
			}
			union = append(union, f)
		}
	}
	slices.Sort(union)
	if !slices.Equal(union, files) { // shard 1 has no metadata.sqlite: shard 0 wrote it
		t.Errorf("shards restored %v together, want each of %v once", union, files)
	}
}

// TestRecoverFromAnotherStore: a new store with an empty backup starts from
// spec.restore's backup as it was at the point in time.
func TestRecoverFromAnotherStore(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	old := target(s3, "ns/d1/orders")
	ctx := context.Background()
	data := t.TempDir()
	w := startWorkerd(t, data)
	w.call(t, "/put?obj=x&k=k&v=before")
	r, err := backup.Start(ctx, backup.Options{Target: old, Dir: data, StateDir: t.TempDir()}, testr.New(t))
	must(t, err)
	waitShipped(t, r, 3)
	time.Sleep(1100 * time.Millisecond)
	at := time.Now()
	time.Sleep(1100 * time.Millisecond)
	w.call(t, "/put?obj=x&k=k&v=after")
	must(t, r.Sync(ctx))
	must(t, r.Close(ctx))
	w.stop()
	dir := t.TempDir()
	what, err := recoverInto(t, backup.RecoverOptions{Dir: dir,
		Backup: &backup.Source{Target: target(s3, "ns/d1/orders-restored")}, Restore: &backup.Source{Target: old, PointInTime: at}})
	must(t, err)
	if !strings.Contains(what, "spec.restore") {
		t.Errorf("recovery says %q, want it to name spec.restore", what)
	}
	w = startWorkerd(t, dir)
	if got := w.call(t, "/get?obj=x&k=k"); got != "before" {
		t.Errorf("object x restored to %s: %q, want before", at, got)
	}
}

// TestRecoverRefusesWhatItCannotRead: with the bucket unreachable an empty volume is
// not started empty; a restore cut short is started again from an empty directory.
func TestRecoverRefusesWhatItCannotRead(t *testing.T) {
	down := backup.Target{Endpoint: "http://" + testenv.FreeLoopbackAddr(t), Bucket: "backups", Prefix: "p",
		AccessKeyID: "k", SecretAccessKey: "s"}
	dir := t.TempDir()
	if _, err := recoverInto(t, backup.RecoverOptions{Dir: dir, Backup: &backup.Source{Target: down}}); err == nil {
		t.Error("recovery with the bucket unreachable succeeded; the pod would start empty")
	}
	if _, err := os.Stat(filepath.Join(dir, backup.VolumeMarker)); err == nil {
		t.Error("the volume was marked initialised after a failed recovery")
	}

	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/q/jobs")
	files := seed(t, tg, "v", "j1")
	must(t, os.WriteFile(filepath.Join(dir, backup.RestoringMarker), nil, 0o600))
	partial := filepath.Join(dir, files[0])
	must(t, os.MkdirAll(filepath.Dir(partial), 0o700))
	must(t, os.WriteFile(partial, []byte("half a database"), 0o600))
	_, err := recoverInto(t, backup.RecoverOptions{Dir: dir, Backup: &backup.Source{Target: tg}})
	must(t, err)
	if got := dbFiles(t, dir); !slices.Equal(got, files) {
		t.Errorf("after an interrupted restore: %v, want %v", got, files)
	}
	w := startWorkerd(t, dir)
	if got := w.call(t, "/get?obj=j1&k=k"); got != "v" {
		t.Errorf("object j1: %q, want v", got)
	}
}

// TestBlobsFollowTheDatabases: a KV host's blob files are shipped and restored with
// its databases, byte for byte.
func TestBlobsFollowTheDatabases(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/kv/assets")
	ctx := context.Background()
	data, blobs := t.TempDir(), t.TempDir()
	w := startWorkerd(t, data)
	w.call(t, "/put?obj=a&k=k&v=row")
	want := map[string]string{"ns1/blobs/b1": strings.Repeat("x", 70_000), "ns1/blobs/b2": "second"}
	for rel, v := range want {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(blobs, rel)), 0o700))
		must(t, os.WriteFile(filepath.Join(blobs, rel), []byte(v), 0o600))
	}
	r, err := backup.Start(ctx, backup.Options{Target: tg, Dir: data, StateDir: t.TempDir(), BlobsDir: blobs}, testr.New(t))
	must(t, err)
	waitShipped(t, r, 3)
	must(t, r.Close(ctx))
	dir, blobsAgain := t.TempDir(), t.TempDir()
	_, err = recoverInto(t, backup.RecoverOptions{Dir: dir, BlobsDir: blobsAgain, Backup: &backup.Source{Target: tg}})
	must(t, err)
	for rel, v := range want {
		got, err := os.ReadFile(filepath.Join(blobsAgain, rel))
		if err != nil || string(got) != v {
			t.Errorf("blob %s restored as %d bytes (%v), want %d", rel, len(got), err, len(v))
		}
	}
}

// TestWipedUnderARunningPod: the store's directory is wiped while workerd runs and
// workerd writes anew. The replicator stops shipping (the emptied store never becomes
// the newest backup); at the pod's next start the new files are moved aside and the
// backup is restored.
func TestWipedUnderARunningPod(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/dons/wiped")
	ctx := context.Background()
	dir := t.TempDir()
	_, err := recoverInto(t, backup.RecoverOptions{Dir: dir, Backup: &backup.Source{Target: tg}})
	must(t, err)
	w := startWorkerd(t, dir)
	w.call(t, "/put?obj=a&k=k&v=precious")
	r, err := backup.Start(ctx, backup.Options{Target: tg, Dir: dir, StateDir: t.TempDir(), RequireMarker: true}, testr.New(t))
	must(t, err)
	waitShipped(t, r, 3)
	w.stop()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		must(t, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	w = startWorkerd(t, dir) // workerd writes into the wiped directory
	w.call(t, "/put?obj=b&k=k&v=after-the-wipe")
	must(t, r.Sync(ctx))
	if st := r.Status(); !st.VolumeLost {
		t.Errorf("status after the wipe: %+v, want volumeLost", st)
	}
	must(t, r.Close(ctx))
	w.stop()
	what, err := recoverInto(t, backup.RecoverOptions{Dir: dir, Backup: &backup.Source{Target: tg}})
	must(t, err)
	w = startWorkerd(t, dir)
	if got := w.call(t, "/get?obj=a&k=k"); got != "precious" {
		t.Errorf("object a after the pod's restart: %q, want precious (%s)", got, what)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, backup.LostPrefix+"*", "*", "*.sqlite"))
	if len(aside) == 0 {
		t.Errorf("the files written after the wipe were not kept aside")
	}
}

// TestMirroredVolumeIsShipped: a volume Recover filled from the store's own backup (or
// started empty with it) holds nothing the bucket lacks, so the replicator started on
// it reports Restored before its first pass (Shipped after), once; one shipping to
// another target reports neither.
func TestMirroredVolumeIsShipped(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	ctx := context.Background()
	tg := target(s3, "ns/kv/mirrored")
	dir := t.TempDir()
	if _, err := recoverInto(t, backup.RecoverOptions{Dir: dir, Backup: &backup.Source{Target: tg}}); err != nil {
		t.Fatal(err)
	}
	other := tg
	other.Endpoint = "http://127.0.0.1:1" // nothing listens: no pass completes
	r, err := backup.Start(ctx, backup.Options{Target: other, Dir: dir, StateDir: t.TempDir(), Background: true}, testr.New(t))
	must(t, err)
	// The volume is empty: a background pass may complete with nothing to send, which
	// is Shipped (the bucket lacks nothing), never Restored.
	if st := r.Status(); st.Restored || st.Shipped && st.Databases != 0 {
		t.Errorf("Restored, or Shipped without a pass, to a target the volume was not restored from: %+v", st)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = r.Close(cctx)

	dir2 := t.TempDir()
	if _, err := recoverInto(t, backup.RecoverOptions{Dir: dir2, Backup: &backup.Source{Target: tg}}); err != nil {
		t.Fatal(err)
	}
	r2, err := backup.Start(ctx, backup.Options{Target: tg, Dir: dir2, StateDir: t.TempDir(), Background: true}, testr.New(t))
	must(t, err)
	if st := r2.Status(); !st.Shipped && !st.Restored {
		t.Errorf("neither Shipped nor Restored on a volume restored from its own target: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir2, backup.MirroredMarker)); !os.IsNotExist(err) {
		t.Errorf("%s left on the volume (%v): a later start must not trust it", backup.MirroredMarker, err)
	}
	must(t, r2.Close(ctx))
}
