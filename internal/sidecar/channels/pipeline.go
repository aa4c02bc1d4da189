package channels

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// deadlineRenewer is a request body whose read deadline can be renewed (the sidecar's
// body timeout): a pipeline gets the timeout per line instead of for its whole body.
type deadlineRenewer interface{ RenewDeadline() }

// pipeline serves POST .../pipeline: publishes as JSON lines {"channel","message"} on one
// request body, each answered in order by one line {"reached":N} or {"error":{...}}, while
// the body is still being sent (RESP's shape: one request for many publishes, and a
// publisher may send the next before the answer to the last). Answers are flushed when no
// further line is buffered. Each line has the sidecar's body timeout to arrive; a line over
// the request body limit ends the pipeline with MESSAGE_TOO_LARGE.
func (a httpAPI) pipeline(w http.ResponseWriter, r *http.Request) {
	rc, ok := startDuplex(w, r)
	if !ok {
		return
	}
	defer endDuplex(rc, r.Body)
	defer a.endOnShutdown(rc)()
	renew, _ := r.Body.(deadlineRenewer)
	br := bufio.NewReaderSize(r.Body, 64<<10)
	var out []byte
	for {
		line, err := readLine(br, maxBodyBytes)
		if renew != nil {
			renew.RenewDeadline()
		}
		if errors.Is(err, errLineTooLong) {
			e := limitError(CodeMessageTooLarge, maxBodyBytes, "channel API request body limit", "pipeline line over %d bytes", maxBodyBytes)
			// After the answers of the lines before it still in out: answers are matched
			// to publishes by order.
			_, _ = w.Write(append(appendJSON(out, map[string]any{"error": e}), '\n'))
			return
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			out = append(a.publishLine(out, r, line), '\n')
		}
		if stop := a.m.stopping(); err != nil || br.Buffered() == 0 || stop {
			if _, werr := w.Write(out); werr != nil || rc.Flush() != nil || err != nil || stop {
				return // io.EOF: the publisher sent its last line
			}
			out = out[:0]
		}
	}
}

// startDuplex answers 200 with JSON lines at once, and lets the handler read its body
// while it writes (full duplex); ok is false when that failed (answered or gone). A
// handler that started one calls endDuplex before it returns.
func startDuplex(w http.ResponseWriter, r *http.Request) (rc *http.ResponseController, ok bool) {
	r.Body = &duplexBody{ReadCloser: r.Body}
	rc = http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		writeError(w, err)
		return nil, false
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	return rc, rc.Flush() == nil
}

// endDuplex ends a full-duplex request whose body may not have been read to its end (a
// line over the body limit, a failed write): its read deadline passes at once and the
// body is closed, so the connection is closed. Otherwise net/http would read the rest of
// the body until the body timeout before ending the answer, and then panic (and log it)
// reading the next request on the connection (https://github.com/golang/go/issues/68560).
// A body read to its end is only closed: the connection is kept, and a deadline past
// would fail net/http's background read on it, which cancels the context of every later
// request on that connection (a channel wait then ends at once).
func endDuplex(rc *http.ResponseController, body io.Closer) {
	if b, ok := body.(*duplexBody); !ok || !b.ended {
		_ = rc.SetReadDeadline(time.Now())
	}
	_ = body.Close()
}

// duplexBody is a duplex request's body, noting whether it was read to its end.
type duplexBody struct {
	io.ReadCloser
	ended bool
}

func (b *duplexBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ended = true
	}
	return n, err
}

// RenewDeadline renews the body's deadline (deadlineRenewer) when the body underneath
// has one.
func (b *duplexBody) RenewDeadline() {
	if r, ok := b.ReadCloser.(deadlineRenewer); ok {
		r.RenewDeadline()
	}
}

// endOnShutdown makes a duplex request's next read of its body fail once the manager
// shuts down (the handler checks stopping after each line, as the body's deadline is
// renewed per line): its caller may keep the body open, and the sidecar's graceful stop
// would wait for the handler until its timeout. Call the result when the handler returns.
func (a httpAPI) endOnShutdown(rc *http.ResponseController) (done func()) {
	returned := make(chan struct{})
	go func() {
		select {
		case <-a.m.shutdown:
			_ = rc.SetReadDeadline(time.Now())
		case <-returned:
		}
	}()
	return func() { close(returned) }
}

// publishLine appends the answer to one pipelined publish.
func (a httpAPI) publishLine(out []byte, r *http.Request, line []byte) []byte {
	var req struct {
		Channel *string `json:"channel"`
		Message *string `json:"message"`
	}
	var err error
	switch {
	case json.Unmarshal(line, &req) != nil:
		err = newError(http.StatusBadRequest, CodeInvalidArgument, "pipeline line is not the JSON object {\"channel\",\"message\"}")
	case req.Channel == nil || req.Message == nil:
		err = newError(http.StatusBadRequest, CodeInvalidArgument, "fields channel and message are required (JSON strings)")
	}
	n := 0
	if err == nil {
		n, err = a.m.Publish(key(r), *req.Channel, *req.Message)
	}
	if err != nil {
		return appendJSON(out, map[string]any{"error": asError(err)})
	}
	out = append(out, `{"reached":`...)
	out = strconv.AppendInt(out, int64(n), 10)
	return append(out, '}')
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line (its newline included) of at most limit bytes; at the end of
// the body it returns what is left with io.EOF.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	long := append([]byte(nil), line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(long) > limit {
			return nil, errLineTooLong
		}
		line, err = br.ReadSlice('\n')
		long = append(long, line...)
	}
	if len(long) > limit {
		return nil, errLineTooLong
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	return long, err
}
