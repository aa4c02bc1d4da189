package backup

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// openerEnv names the database TestHelperOpener opens and writes in a child process.
const openerEnv = "BACKUP_TEST_OPENER_DB"

// TestHelperOpener is not a test: in a child process of TestNoOpenerSeesBusy it opens
// the database, writes one row and closes it, over and over, as workerd does with a
// Durable Object's database when the object is used and evicted. Like workerd it sets
// no busy handler, so any lock the backup holds that it would wait on fails it.
func TestHelperOpener(t *testing.T) {
	path := os.Getenv(openerEnv)
	if path == "" {
		t.Skip("runs only as TestNoOpenerSeesBusy's child process")
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		if err := openWriteClose(path); err != nil {
			t.Fatal(err)
		}
	}
}

func openWriteClose(path string) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, stmt := range []string{"PRAGMA journal_mode=WAL", "INSERT INTO t VALUES (randomblob(3000))"} {
		if _, err := db.Exec(stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// TestNoOpenerSeesBusy: a process that opens and closes a database again and again
// with no busy handler (workerd) never fails while the backup reads it as fast as it
// can. The first connection to a WAL database rebuilds its index under an exclusive
// lock (https://www.sqlite.org/walformat.html#recovery); the backup must never be it.
func TestNoOpenerSeesBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "obj.sqlite")
	if err := createTable(path); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestHelperOpener$", "-test.count=1")
	child.Env = append(os.Environ(), openerEnv+"="+path)
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	tmp, reads, unsettled := t.TempDir(), 0, 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the opener failed while the backup read the database %d times: %v\n%s", reads, err, out.String())
			}
			if reads < 100 {
				t.Fatalf("only %d reads ran beside the opener; the test proves nothing", reads)
			}
			t.Logf("%d reads beside the opener (and %d passes that found it written during every copy)", reads, unsettled)
			checkReadsAsSQLite(t, path, tmp)
			return
		default:
		}
		_, _, _, err := readPages(context.Background(), path, tmp, func(uint32, uint64) bool { return true })
		switch {
		case errors.Is(err, errNotQuiet):
			// Written during each of its copies: the replicator's next pass reads again.
			unsettled++
		case err != nil:
			t.Fatalf("read %d: %v", reads+1, err)
		default:
			reads++
		}
	}
}

func createTable(path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec("CREATE TABLE t (v BLOB)")
	return err
}

// checkReadsAsSQLite: the pages readPages returns make a database holding what SQLite
// itself reads from path.
func checkReadsAsSQLite(t *testing.T, path, tmp string) {
	_, pages, _, err := readPages(context.Background(), path, tmp, func(uint32, uint64) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := filepath.Join(t.TempDir(), "rebuilt.sqlite")
	f, err := os.Create(rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if _, err := f.WriteAt(p.Data, int64(p.No-1)*int64(len(p.Data))); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if got, want := rowCount(t, rebuilt), rowCount(t, path); got != want || want == 0 {
		t.Errorf("the pages read hold %d rows; SQLite reads %d from the database", got, want)
	}
}

func rowCount(t *testing.T, path string) int {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQuietReadHoldsNothing: reading a database nobody has open (what a crash leaves:
// file, WAL and index, no connection) reads what SQLite reads from it, and leaves no
// lock and no open file behind: a lock left would make the next connection skip
// resetting the index, and a descriptor closed later, by the garbage collector, drops
// the locks of whatever connection then has the file open.
func TestQuietReadHoldsNothing(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live.sqlite")
	db, err := sql.Open("sqlite", "file:"+live+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, stmt := range []string{"CREATE TABLE t (v BLOB)", "INSERT INTO t VALUES (randomblob(5000))", "INSERT INTO t VALUES (randomblob(5000))"} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "crashed.sqlite")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := copyFile(live+suffix, path+suffix); err != nil {
			t.Fatal(err)
		}
	}
	fds := openFiles(t)
	tmp := t.TempDir()
	checkReadsAsSQLite(t, path, tmp)
	if now := openFiles(t); now != fds {
		t.Errorf("%d files open after the read, %d before", now, fds)
	}
	if openElsewhere(path) {
		t.Error("a lock on the WAL index's DMS byte is left after the read")
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the copy is left in %s: %v", tmp, entries)
	}
}

func openFiles(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
