package workflows

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// maxGroup bounds the changes committed in one transaction.
const maxGroup = 512

// errClosed answers commits asked for after the engine closed.
var errClosed = errors.New("workflows: the engine is closed")

// committer is the engine's group commit: every change to the store (step results,
// sleeps, waits, dispatches, run outcomes, creates, events) is queued, and one goroutine
// commits everything queued in one transaction with one fsync. While a commit is on the
// disk the next group gathers, so a lone change waits for no timer and concurrent
// changes share the fsync. A change whose function fails is taken out and answered with
// its error; the rest of its group is committed again without it.
type committer struct {
	db    *bolt.DB
	fault *atomic.Pointer[func() error]

	mu     sync.Mutex
	queue  []*commitCall
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

type commitCall struct {
	f func(tx *bolt.Tx) error
	// done gets the outcome, on the committer's goroutine: it must not wait.
	done func(error)
	// faulted/faultErr: the fault (tests) is asked once per change, however often the
	// change runs.
	faulted  bool
	faultErr error
}

func newCommitter(db *bolt.DB, fault *atomic.Pointer[func() error]) *committer {
	c := &committer{db: db, fault: fault, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.loop()
	return c
}

// commit runs f in a group transaction and returns once that is on the disk. f may run
// more than once (its group is committed again without a failing change): it must read
// what it needs from tx and set its results afresh on each run. f must not wait for
// anything that may wait for a commit (the run locks).
func (c *committer) commit(f func(tx *bolt.Tx) error) error {
	ch := make(chan error, 1)
	c.commitAsync(f, func(err error) { ch <- err })
	return <-ch
}

// commitAsync queues f as commit does and returns at once; done gets the outcome.
// Changes are committed in the order they are queued.
func (c *committer) commitAsync(f func(tx *bolt.Tx) error, done func(error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		done(errClosed)
		return
	}
	c.queue = append(c.queue, &commitCall{f: f, done: done})
	select {
	case c.wake <- struct{}{}:
	default: // the loop is awake already: it takes everything queued
	}
}

// close answers what is queued with errClosed and stops the loop.
func (c *committer) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.wake)
	}
	c.mu.Unlock()
	<-c.done
}

func (c *committer) loop() {
	defer close(c.done)
	for range c.wake {
		for {
			c.mu.Lock()
			n := min(len(c.queue), maxGroup)
			group := c.queue[:n:n]
			c.queue = c.queue[n:]
			closed := c.closed
			c.mu.Unlock()
			if len(group) == 0 {
				break
			}
			if closed {
				for _, call := range group {
					call.done(errClosed)
				}
				continue
			}
			c.run(group)
		}
	}
}

// run commits group, leaving out each change whose function fails.
func (c *committer) run(group []*commitCall) {
	fault := c.fault.Load()
	for len(group) > 0 {
		failed, ferr := -1, error(nil)
		err := c.db.Update(func(tx *bolt.Tx) error {
			for i, call := range group {
				if err := call.run(tx, fault); err != nil {
					failed, ferr = i, err
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, call := range group {
				call.done(err)
			}
			return
		}
		group[failed].done(ferr)
		group = append(group[:failed:failed], group[failed+1:]...)
	}
}

// run calls f (a panic is its error, as bbolt's Batch does), then the fault once.
func (call *commitCall) run(tx *bolt.Tx, fault *func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("workflows: panic in a commit: %v", p)
		}
	}()
	if err := call.f(tx); err != nil {
		return err
	}
	if fault != nil && !call.faulted {
		call.faulted, call.faultErr = true, (*fault)()
	}
	return call.faultErr
}
