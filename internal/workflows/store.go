package workflows

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
	bolt "go.etcd.io/bbolt"
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

type store struct{ db *bolt.DB }

func openStore(dir string) (*store, error) {
	p := filepath.Join(dir, "workflows.db")
	db, err := bolt.Open(p, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("workflows: open store %s: %w", p, err)
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
	return &store{db: db}, nil
}

func ikey(wf, id string) []byte { return []byte(wf + "\x00" + id) }

func skey(kind, name string, n int) []byte {
	return []byte(fmt.Sprintf("%s\x00%s\x00%d", kind, name, n))
}

func u64(v uint64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, v); return b }

var errNotFound = errors.New("not found")

func getInstance(tx *bolt.Tx, wf, id string) (*api.Instance, error) {
	v := tx.Bucket(bInstances).Get(ikey(wf, id))
	if v == nil {
		return nil, errNotFound
	}
	var in api.Instance
	if err := json.Unmarshal(v, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

func putInstance(tx *bolt.Tx, in *api.Instance) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return tx.Bucket(bInstances).Put(ikey(in.Workflow, in.ID), b)
}

func nextSeq(tx *bolt.Tx, name string) uint64 {
	m := tx.Bucket(bMeta)
	var v uint64
	if b := m.Get([]byte(name)); b != nil {
		v = binary.BigEndian.Uint64(b)
	}
	v++
	_ = m.Put([]byte(name), u64(v))
	return v
}

func stepBucket(tx *bolt.Tx, wf, id string, create bool) (*bolt.Bucket, error) {
	if create {
		return tx.Bucket(bSteps).CreateBucketIfNotExists(ikey(wf, id))
	}
	return tx.Bucket(bSteps).Bucket(ikey(wf, id)), nil
}

func eventBucket(tx *bolt.Tx, wf, id string, create bool) (*bolt.Bucket, error) {
	if create {
		return tx.Bucket(bEvents).CreateBucketIfNotExists(ikey(wf, id))
	}
	return tx.Bucket(bEvents).Bucket(ikey(wf, id)), nil
}

func getStep(tx *bolt.Tx, wf, id, kind, name string, n int) (*api.Step, error) {
	b, _ := stepBucket(tx, wf, id, false)
	if b == nil {
		return nil, errNotFound
	}
	v := b.Get(skey(kind, name, n))
	if v == nil {
		return nil, errNotFound
	}
	var s api.Step
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func putStep(tx *bolt.Tx, wf, id string, s *api.Step) error {
	b, err := stepBucket(tx, wf, id, true)
	if err != nil {
		return err
	}
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return b.Put(skey(s.Kind, s.Name, s.N), v)
}

func deleteInstanceData(tx *bolt.Tx, wf, id string, withInstance bool) error {
	k := ikey(wf, id)
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
