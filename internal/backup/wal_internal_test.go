package backup

import (
	"database/sql"
	"path/filepath"
	"testing"
)

// walMark must read what SQLite's WAL index publishes: the salts of the WAL header and
// the last frame of the last commit (https://www.sqlite.org/walformat.html), here the
// same as walState finds by reading the WAL's frames.
func TestWalMarkIsTheLastCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for i, stmt := range []string{
		"CREATE TABLE t (v BLOB)",
		"INSERT INTO t VALUES (randomblob(10000))",
		"INSERT INTO t VALUES (randomblob(100))",
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
		mark, ok := walMark(path)
		state, valid, _, ok2 := walState(path, walCursor{})
		if !ok || !ok2 {
			t.Fatalf("after %q: no WAL index (%v) or WAL (%v)", stmt, ok, ok2)
		}
		if mark != state || mark.frames != valid || mark.frames <= int64(i) {
			t.Errorf("after %q: index mark %+v, WAL %+v with %d frames", stmt, mark, state, valid)
		}
	}
}
