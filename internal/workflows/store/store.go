// Package store is the Workflows engine's instance store: a bbolt file
// (<data dir>/workflows.db, fsync on every commit) with the instance records, one
// record per step (kind, name, occurrence count) and the events sent to each instance.
// The functions work inside the caller's transaction.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Event is one event sent to an instance.
type Event struct {
	Seq       uint64          `json:"seq"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Timestamp int64           `json:"timestampMs"`
	Consumed  bool            `json:"consumed"`
}

var (
	bInstances = []byte("instances")
	bSteps     = []byte("steps")
	bEvents    = []byte("events")
	bMeta      = []byte("meta")
)

// FileName is the store's file in the engine's data directory.
const FileName = "workflows.db"

// Open opens (creating) <dir>/workflows.db with its buckets. A file bbolt cannot read
// (garbage, truncated, a page overwritten) fails with ErrDamaged and is left as it is:
// the engine does not start, rather than start empty over the instances it held.
func Open(dir string) (db *bolt.DB, err error) {
	p := filepath.Join(dir, FileName)
	defer func() {
		// bbolt panics on some damaged pages while it opens the file
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			db, err = nil, damaged(p, fmt.Errorf("%v", r))
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	db, err = bolt.Open(p, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) || errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("workflows: open store %s: %w", p, err)
		}
		return nil, damaged(p, err)
	}
	if err := check(db, p); err != nil {
		db.Close()
		return nil, damaged(p, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bInstances, bSteps, bEvents, bMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("workflows: init store %s: %w", p, err)
	}
	db.MaxBatchDelay = 2 * time.Millisecond // group commit window for concurrent step results
	return db, nil
}

// ErrDamaged: workflows.db cannot be read; see docs/workflows.md "A damaged store".
var ErrDamaged = errors.New("is damaged")

func damaged(p string, cause error) error {
	return fmt.Errorf("workflows: store %s %w (%v); the engine does not start over it. Move the file aside "+
		"to start with no instances, or restore it from a backup: docs/workflows.md \"A damaged store\"", p, ErrDamaged, cause)
}

// check reads every page of db: the file must be as long as its pages say (a shorter
// one faults on read), and bbolt's consistency check must pass.
func check(db *bolt.DB, p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		if fi.Size() < tx.Size() {
			return fmt.Errorf("truncated: %d bytes, its pages need %d", fi.Size(), tx.Size())
		}
		var errs []error
		for err := range tx.Check() {
			if len(errs) < 3 {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// Key is the key of instance id of workflow wf (also of its step and event buckets).
func Key(wf, id string) []byte { return []byte(wf + "\x00" + id) }

func skey(kind, name string, n int) []byte {
	return []byte(fmt.Sprintf("%s\x00%s\x00%d", kind, name, n))
}

// U64 is v as an 8-byte big-endian key.
func U64(v uint64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, v); return b }

// ErrNotFound: no such instance or step.
var ErrNotFound = errors.New("not found")

// GetInstance reads an instance (ErrNotFound).
func GetInstance(tx *bolt.Tx, wf, id string) (*api.Instance, error) {
	v := tx.Bucket(bInstances).Get(Key(wf, id))
	if v == nil {
		return nil, ErrNotFound
	}
	var in api.Instance
	if err := json.Unmarshal(v, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// PutInstance writes an instance.
func PutInstance(tx *bolt.Tx, in *api.Instance) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return tx.Bucket(bInstances).Put(Key(in.Workflow, in.ID), b)
}

// NextSeq increments and returns the counter name.
func NextSeq(tx *bolt.Tx, name string) uint64 {
	m := tx.Bucket(bMeta)
	var v uint64
	if b := m.Get([]byte(name)); b != nil {
		v = binary.BigEndian.Uint64(b)
	}
	v++
	_ = m.Put([]byte(name), U64(v))
	return v
}

// StepBucket is the bucket of an instance's steps (nil when absent and not create).
func StepBucket(tx *bolt.Tx, wf, id string, create bool) (*bolt.Bucket, error) {
	if create {
		return tx.Bucket(bSteps).CreateBucketIfNotExists(Key(wf, id))
	}
	return tx.Bucket(bSteps).Bucket(Key(wf, id)), nil
}

// EventBucket is the bucket of an instance's events, keyed by U64(seq).
func EventBucket(tx *bolt.Tx, wf, id string, create bool) (*bolt.Bucket, error) {
	if create {
		return tx.Bucket(bEvents).CreateBucketIfNotExists(Key(wf, id))
	}
	return tx.Bucket(bEvents).Bucket(Key(wf, id)), nil
}

// GetStep reads step (kind, name, n) of an instance (ErrNotFound).
func GetStep(tx *bolt.Tx, wf, id, kind, name string, n int) (*api.Step, error) {
	b, _ := StepBucket(tx, wf, id, false)
	if b == nil {
		return nil, ErrNotFound
	}
	v := b.Get(skey(kind, name, n))
	if v == nil {
		return nil, ErrNotFound
	}
	var s api.Step
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// PutStep writes a step of an instance.
func PutStep(tx *bolt.Tx, wf, id string, s *api.Step) error {
	b, err := StepBucket(tx, wf, id, true)
	if err != nil {
		return err
	}
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return b.Put(skey(s.Kind, s.Name, s.N), v)
}

// DeleteInstance deletes an instance's steps and events, and the instance record when
// withInstance.
func DeleteInstance(tx *bolt.Tx, wf, id string, withInstance bool) error {
	k := Key(wf, id)
	if tx.Bucket(bSteps).Bucket(k) != nil {
		if err := tx.Bucket(bSteps).DeleteBucket(k); err != nil {
			return err
		}
	}
	if tx.Bucket(bEvents).Bucket(k) != nil {
		if err := tx.Bucket(bEvents).DeleteBucket(k); err != nil {
			return err
		}
	}
	if withInstance {
		return tx.Bucket(bInstances).Delete(k)
	}
	return nil
}

// Instances is the bucket of instance records, keyed by Key(workflow, id).
func Instances(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bInstances) }
