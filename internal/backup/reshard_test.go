package backup_test

import (
	"context"
	"database/sql"
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

// ownedBy is the ownership of shard ordinal among n (render.ShardFor, as routers route).
func ownedBy(ordinal, n int32) func(id string) bool {
	return func(id string) bool { s, _ := render.ShardFor(id, n); return s == ordinal }
}

// shardOf is the shard of an id among n.
func shardOf(n int32) func(id string) int32 {
	return func(id string) int32 { s, _ := render.ShardFor(id, n); return s }
}

// reshardStore is a store served by n shards (a directory and a workerd each), every
// object written only on its owner, each with a value and an alarm.
type reshardStore struct {
	tg      backup.Target
	dirs    []string
	objects []string
	ids     map[string]string // object name -> id
	// probe is the id of the object startWorkerd reads on every shard (not checked).
	probe string
}

// serve runs one workerd per shard of s under count n, writes each object's value
// (and alarm when alarms) on its owner, then stops each shard as a pod stops: workerd
// first, then the sidecar's last pass and its seal.
func (s *reshardStore) serve(t *testing.T, n int32, value string, alarms bool) {
	t.Helper()
	ctx := context.Background()
	for len(s.dirs) < int(n) {
		s.dirs = append(s.dirs, t.TempDir())
	}
	for k := range n {
		w := startWorkerd(t, s.dirs[k])
		r, err := backup.Start(ctx, backup.Options{Target: s.tg, Dir: s.dirs[k], Ordinal: k, StateDir: t.TempDir()}, testr.New(t))
		must(t, err)
		for _, o := range s.objects {
			if !ownedBy(k, n)(s.ids[o]) {
				continue
			}
			w.call(t, fmt.Sprintf("/put?obj=%s&k=k&v=%s", o, value))
			if alarms {
				w.call(t, fmt.Sprintf("/setalarm?obj=%s&v=%d", o, alarmAt(o)))
			}
		}
		w.stop()
		must(t, r.Close(ctx))
		must(t, r.Seal(ctx))
	}
}

// alarmAt is object o's alarm: far ahead, distinct per object.
func alarmAt(o string) int64 {
	return time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() + int64(len(o))*1000 + int64(o[len(o)-1])
}

// reshard runs every shard's restore init container for the change from → to.
func (s *reshardStore) reshard(t *testing.T, from, to int32, since time.Time) {
	t.Helper()
	for len(s.dirs) < int(to) {
		s.dirs = append(s.dirs, t.TempDir())
	}
	for k := range to {
		what, err := backup.Recover(context.Background(), backup.RecoverOptions{Dir: s.dirs[k], Ordinal: k,
			Owns: ownedBy(k, to), OldOwner: shardOf(from), Backup: &backup.Source{Target: s.tg},
			Reshard: &backup.Reshard{From: from, Since: since}}, testr.New(t))
		must(t, err)
		t.Logf("shard %d: %s", k, what)
	}
}

// check: each shard of n holds exactly the objects it owns, with value, and its
// scheduler (metadata.sqlite, workerd's _cf_ALARM) holds exactly their alarms.
func (s *reshardStore) check(t *testing.T, n int32, value string) {
	t.Helper()
	for k := range n {
		var want []string
		for _, o := range s.objects {
			if ownedBy(k, n)(s.ids[o]) {
				want = append(want, "store-key/"+s.ids[o]+".sqlite")
			}
		}
		got := slices.DeleteFunc(dbFiles(t, s.dirs[k]), func(f string) bool {
			return filepath.Base(f) == backup.MetadataFile || backup.ObjectID(filepath.Base(f)) == s.probe
		})
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("shard %d of %d holds %v, want %v", k, n, got, want)
		}
		alarms := alarmRows(t, filepath.Join(s.dirs[k], "store-key", backup.MetadataFile))
		w := startWorkerd(t, s.dirs[k])
		for _, o := range s.objects {
			id := s.ids[o]
			if !ownedBy(k, n)(id) {
				if _, ok := alarms[id]; ok {
					t.Errorf("shard %d of %d schedules the alarm of %s, owned by another shard", k, n, o)
				}
				continue
			}
			if got := w.call(t, "/get?obj="+o+"&k=k"); got != value {
				t.Errorf("%s on shard %d of %d: %q, want %q", o, k, n, got, value)
			}
			if alarms[id] != alarmAt(o)*1e6 {
				t.Errorf("%s on shard %d of %d: scheduled alarm %d ns, want %d", o, k, n, alarms[id], alarmAt(o)*1e6)
			}
			if got := w.call(t, "/getalarm?obj="+o); got != fmt.Sprint(alarmAt(o)) {
				t.Errorf("%s on shard %d of %d: getAlarm() %s, want %d", o, k, n, got, alarmAt(o))
			}
		}
		w.stop()
	}
}

// alarmRows reads workerd's alarm scheduler table: actor id -> scheduled time (ns).
func alarmRows(t *testing.T, file string) map[string]int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	must(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT actor_id, scheduled_time FROM _cf_ALARM`)
	must(t, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var at int64
		must(t, rows.Scan(&id, &at))
		out[id] = at
	}
	return out
}

// TestReshardMovesObjectsAndAlarms: 2 → 5 → 3 → 5 shards (shard 0's volume lost during
// 5 → 3). Each time every shard ends up
// with exactly the objects render.ShardFor gives it under the new count, with their
// newest value and their alarms (moved between the shards' schedulers); running the
// step again changes nothing.
func TestReshardMovesObjectsAndAlarms(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	s := &reshardStore{tg: target(s3, "ns/dons/rooms"), ids: map[string]string{}}
	s.learnIDs(t, 24)
	// 3 → 5 again: shards 3 and 4 find their volumes of the 5-shard era, whose copies
	// of the objects that moved away at 5 → 3 are stale.
	for _, step := range []struct{ from, to int32 }{{2, 5}, {5, 3}, {3, 5}} {
		since := time.Now().Add(-time.Second)
		value := fmt.Sprintf("v%d-%d", step.from, step.to)
		s.serve(t, step.from, value, true)
		if step.from == 5 { // shard 0's volume is lost during the move: a new, empty one
			must(t, os.RemoveAll(s.dirs[0]))
			must(t, os.MkdirAll(s.dirs[0], 0o700))
		}
		s.reshard(t, step.from, step.to, since)
		s.check(t, step.to, value)
		s.reshard(t, step.from, step.to, since) // once per pod: a restart changes nothing
		s.check(t, step.to, value)
	}
}

// learnIDs names n objects and learns the id workerd gives each (the name of its
// file), writing them one by one into a scratch store; the id of startWorkerd's probe
// object is s.probe.
func (s *reshardStore) learnIDs(t *testing.T, n int) {
	t.Helper()
	dir := t.TempDir()
	w := startWorkerd(t, dir)
	defer w.stop()
	seen := map[string]bool{}
	newIDs := func() (out []string) {
		for _, f := range dbFiles(t, dir) {
			if id := backup.ObjectID(filepath.Base(f)); filepath.Base(f) != backup.MetadataFile && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
		return out
	}
	if ids := newIDs(); len(ids) == 1 {
		s.probe = ids[0]
	}
	for i := range n {
		o := fmt.Sprintf("room-%d", i)
		w.call(t, "/put?obj="+o+"&k=k&v=x")
		ids := newIDs()
		if len(ids) != 1 {
			t.Fatalf("writing %s created the files of %v, want one new object", o, ids)
		}
		s.objects, s.ids[o] = append(s.objects, o), ids[0]
	}
}

// TestReshardWaitsForTheOldSetsSeals: a new shard does not take objects from the
// backup before every shard of the old set sealed after the change began: until
// then their newest state may be on the old owner's volume only.
func TestReshardWaitsForTheOldSetsSeals(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/dons/late")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := backup.Recover(ctx, backup.RecoverOptions{Dir: t.TempDir(), Ordinal: 0, Owns: ownedBy(0, 3), OldOwner: shardOf(2),
		Backup: &backup.Source{Target: tg}, Reshard: &backup.Reshard{From: 2, Since: time.Now()}}, testr.New(t))
	if err == nil || !strings.Contains(err.Error(), "shard 0 did not seal") || !strings.Contains(err.Error(), "docs/scaling.md") {
		t.Fatalf("Recover without the old set's seals: %v, want it to wait for shard 0's seal and name docs/scaling.md", err)
	}
	// Waived (the unsealed-shards annotation): it goes on at once.
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	what, err := backup.Recover(ctx, backup.RecoverOptions{Dir: t.TempDir(), Ordinal: 0, Owns: ownedBy(0, 3), OldOwner: shardOf(2),
		Backup: &backup.Source{Target: tg}, Reshard: &backup.Reshard{From: 2, Since: time.Now(), Unsealed: []int32{0, 1}}}, testr.New(t))
	if err != nil || !strings.Contains(what, "resharded from 2 shards") {
		t.Fatalf("Recover with shards 0 and 1 unsealed: %q, %v; want the step done without waiting", what, err)
	}
}

// TestReshardedAlarmsFire: an alarm due soon after a move runs on the object's new
// shard, also when its old shard's scheduler had lost its row.
func TestReshardedAlarmsFire(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	s := &reshardStore{tg: target(s3, "ns/dons/soon"), ids: map[string]string{}}
	s.learnIDs(t, 12)
	due := time.Now().Add(20 * time.Second).UnixMilli()
	ctx := context.Background()
	for len(s.dirs) < 2 {
		s.dirs = append(s.dirs, t.TempDir())
	}
	since := time.Now().Add(-time.Second)
	for k := range int32(2) {
		w := startWorkerd(t, s.dirs[k])
		r, err := backup.Start(ctx, backup.Options{Target: s.tg, Dir: s.dirs[k], Ordinal: k, StateDir: t.TempDir()}, testr.New(t))
		must(t, err)
		for _, o := range s.objects {
			if ownedBy(k, 2)(s.ids[o]) {
				w.call(t, fmt.Sprintf("/setalarm?obj=%s&v=%d", o, due))
			}
		}
		w.stop()
		if k == 0 {
			// Shard 0's scheduler lost its rows (an alarm running when workerd was
			// killed): the objects still hold their alarms.
			must(t, writeSchedulerRows(filepath.Join(s.dirs[k], "store-key", backup.MetadataFile)))
		}
		must(t, r.Close(ctx))
		must(t, r.Seal(ctx))
	}
	s.reshard(t, 2, 3, since)
	var ws []*workerd
	for k := range int32(3) {
		ws = append(ws, startWorkerd(t, s.dirs[k]))
	}
	time.Sleep(time.Until(time.UnixMilli(due)) + 5*time.Second)
	for _, o := range s.objects {
		for k := range int32(3) {
			want := "0"
			if ownedBy(k, 3)(s.ids[o]) {
				want = "1"
			}
			if got := ws[k].call(t, "/alarms?obj="+o); got != want && want == "1" {
				t.Errorf("%s (shard %d of 3 since the move): its alarm ran %s times on its shard, want once", o, k, got)
			}
		}
	}
}

// writeSchedulerRows empties workerd's alarm scheduler table in file.
func writeSchedulerRows(file string) error {
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`DELETE FROM _cf_ALARM`)
	return err
}
