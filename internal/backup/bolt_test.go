package backup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	bolt "go.etcd.io/bbolt"

	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestBoltStore: a Workflow engine's bbolt store, written while it is shipped, is
// recovered into an empty engine directory as of its last commit, and to a point in
// time between two commits.
func TestBoltStore(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/wf/orders")
	ctx := context.Background()
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "workflows.db"), 0o600, nil)
	must(t, err)
	put := func(k, v string) {
		must(t, db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("instances"))
			if err != nil {
				return err
			}
			return b.Put([]byte(k), []byte(v))
		}))
	}
	for i := range 200 {
		put(fmt.Sprintf("i%03d", i), "step-1")
	}
	r, err := backup.Start(ctx, backup.Options{Target: tg, Dir: dir, StateDir: t.TempDir(), Bolt: map[string]*bolt.DB{"workflows.db": db}}, testr.New(t))
	must(t, err)
	waitShipped(t, r, 1)
	time.Sleep(1100 * time.Millisecond)
	between := time.Now()
	time.Sleep(1100 * time.Millisecond)
	put("i007", "step-2")
	must(t, r.Sync(ctx))
	must(t, r.Close(ctx))
	must(t, db.Close())

	for _, c := range []struct {
		name string
		o    backup.RecoverOptions
		want string
	}{
		{"lost volume", backup.RecoverOptions{Backup: &backup.Source{Target: tg}}, "step-2"},
		{"point in time", backup.RecoverOptions{Restore: &backup.Source{Target: tg, PointInTime: between}}, "step-1"},
	} {
		c.o.Dir, c.o.Files = t.TempDir(), []string{"workflows.db"}
		_, err := recoverInto(t, c.o)
		must(t, err)
		got, err := bolt.Open(filepath.Join(c.o.Dir, "workflows.db"), 0o600, &bolt.Options{ReadOnly: true})
		must(t, err)
		var v string
		n := 0
		must(t, got.View(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("instances"))
			v, n = string(b.Get([]byte("i007"))), b.Stats().KeyN
			return nil
		}))
		got.Close()
		if v != c.want || n != 200 {
			t.Errorf("%s: i007 = %q among %d instances, want %q among 200", c.name, v, n, c.want)
		}
	}
}
