// Package telemetry is the sidecar's end of the tail worker (shim tail.js,
// docs/observability.md): workerd's streaming tail events of every invocation of the
// pod's Worker arrive, summarised per invocation and batched, on POST
// podcontract.TailPath (the pod-internal listener only). Each record becomes Prometheus series (metrics.go) and
// one JSON line per console.* call and uncaught exception on the sidecar's stdout.
package telemetry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// MaxRecordBytes bounds one record of a POST (a JSON array of at most 256 records,
// tail.js): at most 256 log lines and 16 exceptions of 16 KiB characters each (up to 6
// bytes each in JSON) and 64 spans. A batch is read record by record, so a batch as a
// whole is not held in memory. A batch holds at most MaxBatchRecords records (tail.js
// sends at most 256) and MaxBatchBytes in all: past either the rest is refused (413),
// so that one request cannot keep the sidecar decoding for minutes.
const (
	MaxRecordBytes  = 32 << 20
	MaxBatchRecords = 256
	MaxBatchBytes   = 64 << 20
)

// errBatchTooLarge is a batch past MaxBatchRecords or MaxBatchBytes.
var errBatchTooLarge = fmt.Errorf("a batch holds at most %d records and %d bytes", MaxBatchRecords, MaxBatchBytes)

// Record is one invocation as the tail worker summarises it.
type Record struct {
	Worker         string  `json:"worker"`
	Version        string  `json:"version"`
	Entrypoint     string  `json:"entrypoint"`
	ExecutionModel string  `json:"executionModel"`
	Trigger        string  `json:"trigger"`
	Method         string  `json:"method"`
	Cron           string  `json:"cron"`
	Outcome        string  `json:"outcome"`
	Status         int     `json:"status"`
	Start          float64 `json:"start"`
	WallMs         float64 `json:"wallMs"`
	CPUMs          float64 `json:"cpuMs"`
	InvocationID   string  `json:"invocationId"`
	TraceID        string  `json:"traceId"`
	SpanID         string  `json:"spanId"`
	// ParentSpanID is the caller's span when the invocation continues a trace (a Durable
	// Object call from a Worker of the same process).
	ParentSpanID string         `json:"parentSpanId"`
	Subrequests  map[string]int `json:"subrequests"`
	Spans        []Span         `json:"spans"`
	Logs         []Log          `json:"logs"`
	Exceptions   []Exception    `json:"exceptions"`
	Dropped      int            `json:"dropped"`
	// Partial: the logs and exceptions of an invocation still running, past its
	// response (a WebSocket's listeners, a waitUntil): written and counted as logs and
	// exceptions, not as an invocation, which its final record is.
	Partial bool `json:"partial,omitempty"`
}

// Span is a span the invocation opened (a subrequest or binding call, or one nested in it).
type Span struct {
	Name    string  `json:"name"`
	SpanID  string  `json:"spanId"`
	Parent  string  `json:"parent"`
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Outcome string  `json:"outcome"`
}

// Log is one console.* call.
type Log struct {
	At      float64 `json:"at"`
	Level   string  `json:"level"`
	Message string  `json:"message"`
}

// Exception is one uncaught exception.
type Exception struct {
	At      float64 `json:"at"`
	Name    string  `json:"name"`
	Message string  `json:"message"`
	Stack   string  `json:"stack"`
}

// Options configure Handler.
type Options struct {
	// Metrics receive every record; nil records none.
	Metrics *Metrics
	// Logs receives the JSON log lines; nil writes none.
	Logs io.Writer
	// Sinks receive every finished (not partial) record after the metrics and logs (e.g.
	// the OTLP exporter).
	Sinks []func(*Record)
}

// Handler serves POST podcontract.TailPath, a JSON array of records: 204 after
// recording them, 400 on a malformed body.
func Handler(o Options) http.Handler {
	lw := &lineWriter{w: o.Logs}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed: POST a record", http.StatusMethodNotAllowed)
			return
		}
		err := eachRecord(r.Body, func(rec *Record) {
			// Log lines first: a scrape that counts a record finds its lines written.
			lw.write(rec)
			if o.Metrics != nil {
				o.Metrics.observe(rec)
			}
			for _, s := range o.Sinks {
				if !rec.Partial {
					s(rec)
				}
			}
		})
		if errors.Is(err, errBatchTooLarge) {
			http.Error(w, "tail records refused: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			http.Error(w, "malformed tail records (want a JSON array): "+err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// eachRecord decodes body, a JSON array of records, one record at a time, each at
// most MaxRecordBytes, and passes each to f (records before a malformed one count).
func eachRecord(body io.Reader, f func(*Record)) error {
	lim := &budget{r: io.LimitReader(body, MaxBatchBytes+1), left: MaxRecordBytes}
	dec := json.NewDecoder(lim)
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return fmt.Errorf("no array (%v)", err)
	}
	for n := 0; dec.More(); n++ {
		if n == MaxBatchRecords || lim.total > MaxBatchBytes {
			return errBatchTooLarge
		}
		lim.left = MaxRecordBytes
		var rec Record
		if err := dec.Decode(&rec); err != nil {
			return err
		}
		f(&rec)
	}
	_, err := dec.Token()
	return err
}

// budget reads r until left runs out (the decoder reads ahead, so a record's bound is
// MaxRecordBytes plus the decoder's buffer).
type budget struct {
	r           io.Reader
	left, total int64
}

func (b *budget) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("a record over %d bytes", MaxRecordBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	b.total += int64(n)
	if b.total > MaxBatchBytes {
		return n, errBatchTooLarge
	}
	return n, err
}

// LogLine is the JSON object the sidecar writes per console.* call ("type":"log") and
// per uncaught exception ("type":"exception").
type LogLine struct {
	Time       string `json:"time"`
	Type       string `json:"type"`
	Level      string `json:"level"`
	Worker     string `json:"worker"`
	Entrypoint string `json:"entrypoint"`
	Trigger    string `json:"trigger"`
	Method     string `json:"method,omitempty"`
	RequestID  string `json:"requestId"`
	TraceID    string `json:"traceId,omitempty"`
	Name       string `json:"name,omitempty"`
	Message    string `json:"message"`
	Stack      string `json:"stack,omitempty"`
}

// lineWriter writes whole lines under a lock, so concurrent records never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) write(r *Record) {
	if l.w == nil || len(r.Logs)+len(r.Exceptions) == 0 {
		return
	}
	base := LogLine{Worker: r.Worker, Entrypoint: r.Entrypoint, Trigger: r.Trigger, Method: r.Method,
		RequestID: r.InvocationID, TraceID: r.TraceID}
	var buf []byte
	add := func(x LogLine) {
		b, _ := json.Marshal(x)
		buf = append(append(buf, b...), '\n')
	}
	for _, g := range r.Logs {
		x := base
		x.Time, x.Type, x.Level, x.Message = stamp(g.At), "log", g.Level, g.Message
		add(x)
	}
	for _, e := range r.Exceptions {
		x := base
		x.Time, x.Type, x.Level, x.Name, x.Message, x.Stack = stamp(e.At), "exception", "error", e.Name, e.Message, e.Stack
		add(x)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(buf)
}

// stamp is an event time (ms since the epoch) in RFC 3339 with milliseconds, UTC.
func stamp(ms float64) string {
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
