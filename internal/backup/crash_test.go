package backup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// childEnv carries a replicator's Options to TestHelperReplicator in a child process.
const childEnv = "BACKUP_TEST_CHILD_OPTIONS"

// TestHelperReplicator is not a test: it runs a replicator in a child process of
// TestCrashes until the parent kills it.
func TestHelperReplicator(t *testing.T) {
	s := os.Getenv(childEnv)
	if s == "" {
		t.Skip("runs only as TestCrashes' child process")
	}
	var o backup.Options
	must(t, json.Unmarshal([]byte(s), &o))
	if _, err := backup.Start(context.Background(), o, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	select {}
}

// TestCrashes: Durable Object writes run at full speed while the replicator's process
// (the sidecar) is killed with SIGKILL and restarted over and over on the same state,
// and the S3 server is killed and restarted once. No write fails (the backup never
// takes a lock workerd would wait on), and once the load stops and the replicator has
// shipped, a restore equals the live store, object by object.
func TestCrashes(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/dons/crash")
	data, state := t.TempDir(), t.TempDir()
	w := startWorkerd(t, data)
	opts := backup.Options{Target: tg, Dir: data, StateDir: state}
	const objects = 8
	var failed atomic.Int64
	acks := make([][]ack, objects) // per object, the acknowledged writes in order
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range objects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(fmt.Sprintf("http://%s/put?obj=c%d&k=n&v=%d", w.addr, i, n))
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
				} else {
					acks[i] = append(acks[i], ack{time.Now(), n})
				}
				if resp != nil {
					resp.Body.Close()
				}
			}
		}()
	}
	cfg, _ := json.Marshal(opts)
	deadline := time.Now().Add(12 * time.Second)
	for kills := 0; time.Now().Before(deadline); kills++ {
		child := exec.Command(os.Args[0], "-test.run=^TestHelperReplicator$")
		child.Env = append(os.Environ(), childEnv+"="+string(cfg))
		must(t, child.Start())
		time.Sleep(time.Duration(300+rand.IntN(1500)) * time.Millisecond)
		if kills == 3 {
			s3.Kill()
			time.Sleep(time.Second)
			s3.Restart(t)
		}
		_ = child.Process.Kill()
		_ = child.Wait()
	}
	killed := time.Now()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d writes failed while the replicator was shipping and crashing; want 0", n)
	}

	// What the backup held when the replicator was last killed: every write
	// acknowledged rpo before the kill, nothing beyond what was written.
	atKill := t.TempDir()
	_, err := backup.Restore(context.Background(), tg, atKill, backup.RestoreOptions{}, testr.New(t))
	must(t, err)
	w0 := startWorkerd(t, atKill)
	for i := range objects {
		got, _ := strconv.Atoi(w0.call(t, fmt.Sprintf("/get?obj=c%d&k=n", i)))
		floor := ackedBefore(acks[i], killed.Add(-rpo))
		if got < floor || got > acks[i][len(acks[i])-1].n {
			t.Errorf("object c%d in the backup at the last kill: %d; want between %d (acknowledged %v before) and %d (the last write)",
				i, got, floor, rpo, acks[i][len(acks[i])-1].n)
		}
	}
	w0.stop()

	r, err := backup.Start(context.Background(), opts, testr.New(t))
	must(t, err)
	waitShipped(t, r, objects+2)
	must(t, r.Close(context.Background()))
	restored := t.TempDir()
	_, err = backup.Restore(context.Background(), tg, restored, backup.RestoreOptions{}, testr.New(t))
	must(t, err)
	live := map[int]string{}
	for i := range objects {
		live[i] = w.call(t, fmt.Sprintf("/get?obj=c%d&k=n", i))
	}
	w.stop()
	w2 := startWorkerd(t, restored)
	for i := range objects {
		got := w2.call(t, fmt.Sprintf("/get?obj=c%d&k=n", i))
		if got != live[i] {
			t.Errorf("object c%d restored at %q, live at %q", i, got, live[i])
		}
		if n, _ := strconv.Atoi(got); n < 10 {
			t.Errorf("object c%d: only %q writes; the load did not run", i, got)
		}
	}
}

// rpo bounds how long an acknowledged write may wait to be shipped, on a loaded
// 2-core machine: a pass every second, plus its reads and uploads (docs/backup.md).
const rpo = 3 * time.Second

type ack struct {
	at time.Time
	n  int
}

// ackedBefore is the last value acknowledged before t (0 if none).
func ackedBefore(acks []ack, t time.Time) int {
	n := 0
	for _, a := range acks {
		if a.at.After(t) {
			break
		}
		n = a.n
	}
	return n
}

// TestDeltasFollowTheWAL: under a mixed load (small rows, and 256 KiB rows that make
// workerd checkpoint and restart its WAL, so some passes find their WAL cursor gone)
// one replicator ships deltas guided by the WAL frames; a restore afterwards equals the
// live store, object by object, byte for byte.
func TestDeltasFollowTheWAL(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	tg := target(s3, "ns/dons/wal")
	ctx := context.Background()
	data := t.TempDir()
	w := startWorkerd(t, data)
	r, err := backup.Start(ctx, backup.Options{Target: tg, Dir: data, StateDir: t.TempDir()}, testr.New(t))
	must(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				path := fmt.Sprintf("/put?obj=w%d&k=k%d&v=%d", i, n%50, n)
				if n%7 == 0 {
					path = fmt.Sprintf("/fill?obj=w%d&n=1&size=262144", i)
				}
				w.call(t, path)
			}
		}()
	}
	time.Sleep(6 * time.Second)
	close(stop)
	wg.Wait()
	waitShipped(t, r, 6)
	must(t, r.Close(ctx))
	restored := t.TempDir()
	_, err = backup.Restore(ctx, tg, restored, backup.RestoreOptions{}, testr.New(t))
	must(t, err)
	live := map[int]string{}
	for i := range 4 {
		live[i] = w.call(t, fmt.Sprintf("/digest?obj=w%d", i))
	}
	w.stop()
	w2 := startWorkerd(t, restored)
	for i := range 4 {
		if got := w2.call(t, fmt.Sprintf("/digest?obj=w%d", i)); got != live[i] {
			t.Errorf("object w%d restored:\n%.300s\nlive:\n%.300s", i, got, live[i])
		}
	}
}
