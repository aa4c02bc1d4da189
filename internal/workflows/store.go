package workflows

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Instance statuses (cloudflare-semantics.md §3.4).
const (
	StatusQueued          = "queued"
	StatusRunning         = "running"
	StatusPaused          = "paused"
	StatusErrored         = "errored"
	StatusTerminated      = "terminated"
	StatusComplete        = "complete"
	StatusWaitingForPause = "waitingForPause"
	StatusWaiting         = "waiting"
)

// Statuses lists every status, in the order of the numeric codes of the local engine.
var Statuses = []string{StatusQueued, StatusRunning, StatusPaused, StatusErrored, StatusTerminated, StatusComplete, StatusWaitingForPause, StatusWaiting}

func finite(s string) bool {
	return s == StatusComplete || s == StatusErrored || s == StatusTerminated
}

// ErrorInfo is an error as Workers sees it: {name, message}.
type ErrorInfo struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// Instance is the stored record of one workflow instance.
type Instance struct {
	Workflow string          `json:"workflow"`
	ID       string          `json:"id"`
	Seq      uint64          `json:"seq"` // creation order
	Status   string          `json:"status"`
	Params   json.RawMessage `json:"params,omitempty"`
	Created  int64           `json:"createdMs"` // ms since the epoch
	// Started is the first dispatch (ms since the epoch; 0 before).
	Started int64           `json:"startedMs,omitempty"`
	Ended   int64           `json:"endedMs,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   *ErrorInfo      `json:"error,omitempty"`
	// RunID fences dispatches: only the run with the current id may commit.
	RunID uint64 `json:"runId"`
	// WakeAt is when a waiting instance is woken (ms since the epoch; 0 = only by an event).
	WakeAt int64 `json:"wakeAtMs,omitempty"`
	// WaitType is the event type a waiting instance waits for ("" when sleeping).
	WaitType string `json:"waitType,omitempty"`
	// Steps counts the step.do steps started (sleeps and waits do not count).
	Steps int `json:"steps"`
	// StartOrder is the order of the first dispatch among all instances (1-based; 0 before).
	StartOrder uint64 `json:"startOrder,omitempty"`
	// Dispatches counts runs started (replays included).
	Dispatches int `json:"dispatches"`
	// Schedule and ScheduledMs: the cron firing that created the instance (CreateOptions).
	Schedule    string `json:"schedule,omitempty"`
	ScheduledMs int64  `json:"scheduledMs,omitempty"`
}

// Attempt is one recorded attempt of a step.do.
type Attempt struct {
	N     int        `json:"attempt"`
	Start int64      `json:"startMs"`
	End   int64      `json:"endMs"`
	Error *ErrorInfo `json:"error,omitempty"`
	// RetryDelayMs is the engine's delay before the next attempt (unscaled, as the step
	// config computes it); absent when no retry follows.
	RetryDelayMs *int64 `json:"retryDelayMs,omitempty"`
}

// Step is the stored record of one step call (kind do, sleep or waitForEvent; name +
// occurrence count N).
type Step struct {
	Kind   string          `json:"kind"`
	Name   string          `json:"name"`
	N      int             `json:"count"`
	Done   bool            `json:"done"`
	Result json.RawMessage `json:"result,omitempty"` // JSON; absent = undefined
	Error  *ErrorInfo      `json:"error,omitempty"`
	// Attempts (do only).
	Attempts []Attempt `json:"attempts,omitempty"`
	// WakeAt: sleep deadline, next retry, or waitForEvent deadline (ms since the epoch).
	WakeAt int64 `json:"wakeAtMs,omitempty"`
	// Config is the resolved config (do) or {timeout} (waitForEvent).
	Config *StepConfig `json:"config,omitempty"`
	// CommittedAt is when Done was committed (ms since the epoch).
	CommittedAt int64 `json:"committedMs,omitempty"`
}

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

func getInstance(tx *bolt.Tx, wf, id string) (*Instance, error) {
	v := tx.Bucket(bInstances).Get(ikey(wf, id))
	if v == nil {
		return nil, errNotFound
	}
	var in Instance
	if err := json.Unmarshal(v, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

func putInstance(tx *bolt.Tx, in *Instance) error {
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

func getStep(tx *bolt.Tx, wf, id, kind, name string, n int) (*Step, error) {
	b, _ := stepBucket(tx, wf, id, false)
	if b == nil {
		return nil, errNotFound
	}
	v := b.Get(skey(kind, name, n))
	if v == nil {
		return nil, errNotFound
	}
	var s Step
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func putStep(tx *bolt.Tx, wf, id string, s *Step) error {
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
