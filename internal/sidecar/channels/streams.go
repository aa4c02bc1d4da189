package channels

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"sync"
	"time"
)

// A streams request carries at most MaxStreamsPerRequest handles at once, and the
// sidecar MaxStreams over all its streams requests: the stream route's loops are bounded
// by the sidecar's 1024 connections, and each streamed handle costs a goroutine and a
// timer (a few KiB), so these keep the same order of memory.
const (
	MaxStreamsPerRequest = 1024
	MaxStreams           = 4096
)

// CodeStreamLimit: a streams request would stream handle MaxStreamsPerRequest+1, or the
// sidecar handle MaxStreams+1.
const CodeStreamLimit Code = "STREAM_LIMIT"

// streamLimitSource is the Source of STREAM_LIMIT.
const streamLimitSource = "project decision, docs/channels.md: streamed handles per request and per sidecar (sidecar memory)"

// streams serves POST .../streams: the stream route for many handles of one object on
// one full-duplex request. The body carries commands as JSON lines — {"handle","timeoutMs",
// "ack"?} starts streaming a handle, {"handle","stop":true} stops it (answered
// {"handle","stopped":true} after its last line), a blank line only keeps the body
// alive — and the answer carries each handle's stream lines tagged with
// {"handle":...} first, until the caller ends the request. One connection per object
// instead of one per subscriber, and one write carries the lines of every handle ready
// at once, so a publish reaching N subscribers of an isolate costs it one read. A line's
// batch is acknowledged once that write succeeded, as on the stream route. Each command
// line has the sidecar's body timeout to arrive.
func (a httpAPI) streams(w http.ResponseWriter, r *http.Request) {
	rc, ok := startDuplex(w, r)
	if !ok {
		return
	}
	defer endDuplex(rc, r.Body)
	// Not r.Context(): net/http cancels it when a read of the body fails, also at shutdown
	// (endOnShutdown), when the streams still answer REGISTRY_RESTARTED. The handler
	// returns when the caller leaves (its body fails), which cancels ctx.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	lw := newLineWriter(w, rc)
	written := make(chan struct{})
	go func() { defer close(written); lw.run(ctx) }()
	s := &muxStreams{a: a, k: key(r), ctx: ctx, lw: lw, running: map[string]context.CancelFunc{}}
	defer func() {
		cancel()
		s.wg.Wait()
		<-written // the response is not written after the handler returns
	}()
	defer a.endOnShutdown(rc)()
	renew, _ := r.Body.(deadlineRenewer)
	br := bufio.NewReaderSize(r.Body, 4<<10)
	for {
		line, err := readLine(br, maxBodyBytes)
		if renew != nil {
			renew.RenewDeadline()
		}
		if errors.Is(err, errLineTooLong) {
			e := newError(http.StatusBadRequest, CodeInvalidArgument, "streams command line over %d bytes (the request body limit); the request ends", maxBodyBytes)
			e.Limit, e.Source = maxBodyBytes, "channel API request body limit"
			s.fail("", e)
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			s.command(ctx, line)
		}
		if a.m.stopping() {
			s.wg.Wait() // every stream ends with its REGISTRY_RESTARTED line
			return
		}
		if err != nil {
			return // the caller ended its commands (or they stopped arriving): streams end
		}
	}
}

// muxStreams is the state of one streams request: the running handles' cancels.
type muxStreams struct {
	a       httpAPI
	k       Key
	ctx     context.Context // the request's
	lw      *lineWriter
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// command applies one command line; a bad one is answered by an error line for its
// handle (or for "" when it names none).
func (s *muxStreams) command(ctx context.Context, line []byte) {
	var c struct {
		Handle    *string `json:"handle"`
		TimeoutMs float64 `json:"timeoutMs"`
		Ack       uint64  `json:"ack"`
		Stop      bool    `json:"stop"`
	}
	if json.Unmarshal(line, &c) != nil || c.Handle == nil {
		s.fail("", newError(http.StatusBadRequest, CodeInvalidArgument, "streams command is not the JSON object {\"handle\",\"timeoutMs\",\"ack\"} or {\"handle\",\"stop\":true}"))
		return
	}
	h := *c.Handle
	s.mu.Lock()
	stop, busy := s.running[h]
	var err *Error
	stopped := false
	switch {
	case c.Stop && busy:
		stop() // run answers "stopped" after its last line
		delete(s.running, h)
	case c.Stop:
		stopped = true
	case busy:
		err = newError(http.StatusBadRequest, CodeInvalidArgument, "handle %s is already streaming on this request", h)
	default:
		err = s.start(ctx, h, s.a.heartbeat(c.TimeoutMs), c.Ack)
	}
	s.mu.Unlock()
	if err != nil {
		s.fail(h, err)
	}
	if stopped {
		s.stopped(h)
	}
}

// start runs handle h on this request unless a stream limit is reached. s.mu is held.
func (s *muxStreams) start(ctx context.Context, h string, heartbeat time.Duration, ack uint64) *Error {
	if len(s.running) >= MaxStreamsPerRequest {
		return limitError(CodeStreamLimit, MaxStreamsPerRequest, streamLimitSource, "this streams request already streams %d handles", MaxStreamsPerRequest)
	}
	if s.a.m.streaming.Add(1) > MaxStreams {
		s.a.m.streaming.Add(-1)
		return limitError(CodeStreamLimit, MaxStreams, streamLimitSource, "the sidecar already streams %d handles on streams requests", MaxStreams)
	}
	hctx, stop := context.WithCancel(ctx)
	s.running[h] = stop
	s.wg.Add(1)
	go s.run(hctx, h, heartbeat, ack)
	return nil
}

// run streams handle h until it ends or is stopped; its end, if not a stop, is its last
// line (closed, disconnected or an error).
func (s *muxStreams) run(ctx context.Context, h string, heartbeat time.Duration, ack uint64) {
	defer s.wg.Done()
	defer s.a.m.streaming.Add(-1)
	tag := append(append([]byte(`{"handle":`), appendJSON(nil, h)...), ',')
	var tagged []byte
	err := s.a.m.Stream(ctx, s.k, h, heartbeat, ack, func(l *streamLine) error {
		tagged = l.appendTo(append(tagged[:0], tag...))
		tagged = append(tagged[:len(tag)], tagged[len(tag)+1:]...) // the line's own "{" dropped
		err := s.lw.emit(ctx, tagged)
		tagged = smallBuffer(tagged)
		return err
	})
	if err != nil && ctx.Err() == nil {
		s.fail(h, err)
	}
	s.mu.Lock()
	stopped := ctx.Err() != nil // by a stop command (or the request's end)
	if !stopped {
		delete(s.running, h)
	}
	s.mu.Unlock()
	if stopped {
		s.stopped(h)
	}
}

// maxKeptBuffer is the largest line buffer kept for the next line: a streamed handle or
// a streams request lives long, and keeping the capacity of its largest line (up to the
// backlog limit, JSON-escaped) for each of thousands of handles would hold gigabytes.
const maxKeptBuffer = 64 << 10

// smallBuffer is b emptied for reuse, or nil when it grew over maxKeptBuffer.
func smallBuffer(b []byte) []byte {
	if cap(b) > maxKeptBuffer {
		return nil
	}
	return b[:0]
}

// fail writes an error line for handle h.
func (s *muxStreams) fail(h string, err error) {
	line := appendJSON(nil, map[string]any{"handle": h, "error": asError(err)})
	_ = s.lw.emit(s.ctx, append(line, '\n'))
}

// stopped answers a stop of handle h once none of its lines can follow: a line written
// before it may still be on its way when the stop is sent, and the sidecar counts it as
// handed over, so the caller must take it before it waits on or starts h again (or it
// would miss it, or get its messages twice).
func (s *muxStreams) stopped(h string) {
	line := append(appendJSON([]byte(`{"handle":`), h), `,"stopped":true}`+"\n"...)
	_ = s.lw.emit(s.ctx, line)
}

// heartbeat is a stream's heartbeat for timeoutMs: half the lease when absent, at most
// the longest wait.
func (a httpAPI) heartbeat(timeoutMs float64) time.Duration {
	if timeoutMs < 1 {
		return a.m.Lease() / 2
	}
	return time.Duration(min(timeoutMs, float64(a.m.Limits().MaxWait.Milliseconds())) * float64(time.Millisecond))
}

// lineWriter is the one writer of a response that many goroutines emit lines to: what
// is queued while a write is on the connection goes out in the next one.
type lineWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wake  chan struct{}
	mu    sync.Mutex
	buf   []byte
	round *writeRound
	err   error
}

// writeRound is one write: done closes once it is on the connection, with its error.
type writeRound struct {
	done chan struct{}
	err  error
}

func newLineWriter(w http.ResponseWriter, rc *http.ResponseController) *lineWriter {
	return &lineWriter{w: w, rc: rc, wake: make(chan struct{}, 1), round: &writeRound{done: make(chan struct{})}}
}

// emit queues line and returns once the write carrying it is done (its error), or when
// ctx ends first.
func (lw *lineWriter) emit(ctx context.Context, line []byte) error {
	lw.mu.Lock()
	if lw.err != nil {
		lw.mu.Unlock()
		return lw.err
	}
	lw.buf = append(lw.buf, line...)
	round := lw.round
	lw.mu.Unlock()
	select {
	case lw.wake <- struct{}{}:
	default:
	}
	select {
	case <-round.done:
		return round.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes what is queued, one write per wake-up, until a write fails or ctx ends.
func (lw *lineWriter) run(ctx context.Context) {
	var out []byte
	for {
		select {
		case <-lw.wake:
		case <-ctx.Done():
			lw.finish(ctx.Err())
			return
		}
		runtime.Gosched() // let the other subscribers of the same publish queue theirs
		lw.mu.Lock()
		out, lw.buf = lw.buf, out[:0]
		round := lw.round
		lw.round = &writeRound{done: make(chan struct{})}
		lw.mu.Unlock()
		_, err := lw.w.Write(out)
		if err == nil {
			err = lw.rc.Flush()
		}
		out = smallBuffer(out)
		round.err = err
		close(round.done)
		if err != nil {
			lw.finish(err)
			return
		}
	}
}

// finish fails every later emit with err, and the round still queued.
func (lw *lineWriter) finish(err error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.err = err
	lw.round.err = err
	close(lw.round.done)
}
