package store_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
	"github.com/workerd-operator/workerd-operator/internal/workflows/store"
)

// validStore writes a workflows.db holding 500 instances and returns its bytes.
func validStore(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range 500 {
			in := &api.Instance{Workflow: "orders", ID: fmt.Sprintf("order-%d", i), Status: api.StatusQueued, Params: []byte(`"` + strings.Repeat("p", 200) + `"`)}
			if err := store.PutInstance(tx, in); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "workflows.db"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A damaged workflows.db (garbage, truncated, a page overwritten) is refused at Open
// with an error that says so and names the recovery (docs/workflows.md), without a
// panic and without touching the file: the engine never starts empty over it.
func TestOpenRefusesDamagedStore(t *testing.T) {
	good := validStore(t)
	scribbled := bytes.Clone(good)
	copy(scribbled[len(good)/2:], bytes.Repeat([]byte{0xa5}, 8192))
	for name, data := range map[string][]byte{
		"garbage":         []byte(strings.Repeat("not a database ", 1000)),
		"a few bytes":     good[:100],
		"truncated short": good[:5000],
		"truncated half":  good[:len(good)/2],
		"zeroed":          make([]byte, len(good)),
		"scribbled":       scribbled,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "workflows.db")
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var db *bolt.DB
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				db, err = store.Open(dir)
			}()
			if err == nil {
				_ = db.Close()
				t.Fatal("Open accepted a damaged store")
			}
			if msg := err.Error(); !strings.Contains(msg, "is damaged") || !strings.Contains(msg, "docs/workflows.md") || !strings.Contains(msg, p) {
				t.Errorf("error %q: want it to say the file %s is damaged and point to docs/workflows.md", msg, p)
			}
			if after, _ := os.ReadFile(p); !bytes.Equal(after, data) {
				t.Errorf("Open changed the damaged file")
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "workflows.db"), good, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir)
	if err != nil {
		t.Fatalf("the intact store: %v", err)
	}
	_ = db.Close()
}
