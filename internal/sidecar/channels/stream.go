package channels

import (
	"context"
	"strconv"
	"time"
)

// streamLine is one line of the stream route: a batch (msgs from sequence number seq on)
// or, when msgs is empty, the outcome o (timeout, closed, disconnected).
type streamLine struct {
	o    Outcome
	seq  uint64
	msgs []*message
}

// appendTo appends the line as the JSON object Outcome.MarshalJSON writes, newline ended;
// a batch copies each message's pre-encoded JSON.
func (l *streamLine) appendTo(b []byte) []byte {
	if len(l.msgs) == 0 {
		j, _ := l.o.MarshalJSON()
		return append(append(b, j...), '\n')
	}
	b = append(b, `{"outcome":"messages","messages":[`...)
	for i, msg := range l.msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, msg.json...)
	}
	b = append(b, `],"seq":`...)
	b = strconv.AppendUint(b, l.seq, 10)
	return append(b, "}\n"...)
}

// Stream runs the stream route's loop on handle's subscription: emit gets what is queued
// at once (or a timeout), then each batch as it is queued, a timeout after each heartbeat
// without one, and finally closed/disconnected. A batch is acknowledged once emit returned
// nil for it, so what a failed emit did not take stays queued. It returns nil after the
// last line, emit's error, or the error that ended it (before the first line: the
// subscription's error as Wait returns it). The handle is resolved once; the subscription's
// lease is held while it runs, as by a pending wait.
func (m *Manager) Stream(ctx context.Context, k Key, handle string, heartbeat time.Duration, ack uint64, emit func(*streamLine) error) error {
	r, id, err := m.resolve(k, handle)
	if err != nil {
		return err
	}
	r.mu.Lock()
	rd := r.readers[id]
	if rd == nil {
		r.mu.Unlock()
		return m.gone(handle)
	}
	rd.pending++
	r.mu.Unlock()
	m.waiting.Add(1)
	m.metrics.waiting(1)
	defer func() {
		m.waiting.Add(-1)
		m.metrics.waiting(-1)
		r.mu.Lock()
		rd.pending--
		rd.lease = m.now().Add(m.lease)
		r.mu.Unlock()
	}()
	timer := time.NewTimer(heartbeat)
	defer timer.Stop()
	var line streamLine
	for first := true; ; first = false {
		var changed <-chan struct{}
		if err := m.nextLine(r, id, rd, handle, ack, first, &line, &changed); err != nil {
			return err
		}
		if changed != nil {
			select {
			case <-changed:
				continue
			case <-timer.C:
				line = streamLine{o: Outcome{Kind: OutcomeTimeout}, msgs: line.msgs[:0]}
			case <-ctx.Done():
				return ctx.Err()
			case <-m.shutdown:
				return m.restarted()
			}
		}
		err := emit(&line)
		clear(line.msgs) // the messages are not kept alive until a later batch overwrites them
		if err != nil {
			return err
		}
		timer.Reset(heartbeat)
		switch {
		case len(line.msgs) > 0:
			ack = line.seq + uint64(len(line.msgs))
		case line.o.Kind != OutcomeTimeout:
			return nil
		}
	}
}

// nextLine acknowledges up to ack and fills line with what rd has now: a batch, its end,
// or (first) a timeout; otherwise it sets changed to what to wait on.
func (m *Manager) nextLine(r *registry, id uint64, rd *reader, handle string, ack uint64, first bool, line *streamLine, changed *<-chan struct{}) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readers[id] != rd {
		return m.gone(handle)
	}
	if ack > rd.head {
		rd.consume(m, int(min(ack-rd.head, uint64(len(rd.queue)))))
	}
	switch {
	case len(rd.queue) > 0:
		n := rd.batchLen(m, MaxBatch)
		rd.send(m, n)
		// A copy of the pointers: another wait on the handle may acknowledge (and clear)
		// the queue while this line is written.
		*line = streamLine{seq: rd.head, msgs: append(line.msgs[:0], rd.queue[:n]...)}
	case rd.state != "":
		*line = streamLine{o: Outcome{Kind: rd.state, Reason: rd.reason}, msgs: line.msgs[:0]}
	case first:
		*line = streamLine{o: Outcome{Kind: OutcomeTimeout}, msgs: line.msgs[:0]}
	default:
		*changed = rd.changed
	}
	return nil
}
