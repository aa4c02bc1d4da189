package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// PathPrefix is where Handler serves; the sidecar mounts it at this prefix.
const PathPrefix = "/channels/"

// maxBodyBytes bounds a request body: a 64 KiB message JSON-escaped (≤ 6 bytes per byte)
// plus the other fields.
const maxBodyBytes = 6*(64<<10) + 4096

// Handler serves the channel HTTP API of docs/channels.md on m:
//
//	GET  /channels/v1/info
//	POST /channels/v1/objects/{namespace}/{object}/subscribe    {"channel"}            → {"handle"}
//	POST /channels/v1/objects/{namespace}/{object}/publish      {"channel","message"}  → {"reached"}
//	POST /channels/v1/objects/{namespace}/{object}/wait         {"handle","timeoutMs"} → {"outcome","message"|"reason"}
//	                                     batched: {"handle","timeoutMs","max","ack"} → {"outcome":"messages","messages","seq"}|...
//	POST /channels/v1/objects/{namespace}/{object}/stream       {"handle","timeoutMs","ack"} → wait answers, one JSON per line
//	POST /channels/v1/objects/{namespace}/{object}/pipeline     {"channel","message"} per line → {"reached"}|{"error"} per line
//	POST /channels/v1/objects/{namespace}/{object}/streams      {"handle","timeoutMs","ack"}|{"handle","stop"} per line → stream lines tagged {"handle"}, {"handle","stopped"} per stop
//	POST /channels/v1/objects/{namespace}/{object}/unsubscribe  {"handle"}             → {"unsubscribed"}
//	POST /channels/v1/objects/{namespace}/{object}/close        {"channel","reason"}   → {"notified"}
//	GET  /channels/v1/objects/{namespace}/{object}/subscribers?channel=NAME            → {"subscribers"}
//
// Errors are {"error":{"code","message","limit","source"}} with a 4xx/5xx status.
func Handler(m *Manager) http.Handler {
	a := httpAPI{m}
	mux := http.NewServeMux()
	const obj = "/channels/v1/objects/{namespace}/{object}/"
	mux.HandleFunc("GET /channels/v1/info", a.info)
	mux.HandleFunc("POST "+obj+"subscribe", a.subscribe)
	mux.HandleFunc("POST "+obj+"publish", a.publish)
	mux.HandleFunc("POST "+obj+"wait", a.wait)
	mux.HandleFunc("POST "+obj+"stream", a.stream)
	mux.HandleFunc("POST "+obj+"pipeline", a.pipeline)
	mux.HandleFunc("POST "+obj+"streams", a.streams)
	mux.HandleFunc("POST "+obj+"unsubscribe", a.unsubscribe)
	mux.HandleFunc("POST "+obj+"close", a.close)
	mux.HandleFunc("GET "+obj+"subscribers", a.subscribers)
	mux.HandleFunc("/", a.notFound)
	return mux
}

// httpAPI serves the routes of Handler from m.
type httpAPI struct{ m *Manager }

func (a httpAPI) info(w http.ResponseWriter, r *http.Request) {
	l := a.m.Limits()
	writeJSON(w, http.StatusOK, map[string]any{
		"contract": "0.1.0", "bootId": a.m.BootID(), "leaseMs": a.m.Lease().Milliseconds(),
		"limits": map[string]any{
			"maxChannels": l.MaxChannels, "maxSubscribers": l.MaxSubscribers, "maxMessageBytes": l.MaxMessageBytes,
			"maxBacklogBytes": l.MaxBacklogBytes, "maxChannelNameBytes": l.MaxChannelNameBytes,
			"maxWaitMs": l.MaxWait.Milliseconds(), "profile": l.Profile, "loweredBy": l.Source,
		},
	})
}

func (a httpAPI) subscribe(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channel *string `json:"channel"`
	}
	if !decode(w, r, &req) || !present(w, req.Channel, "channel") {
		return
	}
	h, err := a.m.Subscribe(key(r), *req.Channel)
	reply(w, err, func() any { return map[string]any{"handle": h} })
}

func (a httpAPI) publish(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channel *string `json:"channel"`
		Message *string `json:"message"`
	}
	if !decode(w, r, &req) || !present(w, req.Channel, "channel") || !present(w, req.Message, "message") {
		return
	}
	n, err := a.m.Publish(key(r), *req.Channel, *req.Message)
	reply(w, err, func() any { return map[string]any{"reached": n} })
}

func (a httpAPI) wait(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Handle    *string  `json:"handle"`
		TimeoutMs *float64 `json:"timeoutMs"`
		Max       int      `json:"max"` // > 0: a batch (WaitBatch), acknowledged by Ack
		Ack       uint64   `json:"ack"`
	}
	if !decode(w, r, &req) || !present(w, req.Handle, "handle") {
		return
	}
	if req.TimeoutMs == nil {
		writeError(w, newError(http.StatusBadRequest, CodeInvalidArgument, "field timeoutMs is required (milliseconds, 0 polls)"))
		return
	}
	ms := *req.TimeoutMs
	if ms < 0 || ms > float64(a.m.Limits().MaxWait.Milliseconds()) || ms != ms {
		e := newError(http.StatusBadRequest, CodeInvalidArgument, "timeoutMs must be 0..%d (maxWait), got %v", a.m.Limits().MaxWait.Milliseconds(), ms)
		e.Limit, e.Source = a.m.Limits().MaxWait.Milliseconds(), maxWaitSource
		writeError(w, e)
		return
	}
	timeout := time.Duration(ms * float64(time.Millisecond))
	var o Outcome
	var err error
	if req.Max > 0 {
		o, err = a.m.WaitBatch(r.Context(), key(r), *req.Handle, timeout, req.Ack, req.Max)
	} else {
		o, err = a.m.Wait(r.Context(), key(r), *req.Handle, timeout)
	}
	if err != nil && r.Context().Err() != nil {
		// The context can end while the caller still waits for the answer: net/http
		// cancels a connection's context when its background read fails, and every later
		// request on that connection then starts canceled (endDuplex caused that once).
		// A wait that ends early consumed nothing, so it answers as a timed-out one, and
		// its connection closes: a caller still there waits again on a fresh one, one
		// that is gone never reads it.
		w.Header().Set("Connection", "close")
		o, err = Outcome{Kind: OutcomeTimeout}, nil
	}
	reply(w, err, func() any { return o })
}

// stream answers batched waits on one response, one JSON object per line, until the
// subscription closes, is disconnected or gone, or the caller leaves: "messages" lines,
// and a "timeout" line after each timeoutMs without one (a heartbeat). A batch is
// acknowledged once its line is written, so what a broken connection did not take stays
// queued for the next wait or stream. The first line is sent before any message, so the
// caller knows the stream is open.
func (a httpAPI) stream(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Handle    *string `json:"handle"`
		TimeoutMs float64 `json:"timeoutMs"`
		Ack       uint64  `json:"ack"`
	}
	if !decode(w, r, &req) || !present(w, req.Handle, "handle") {
		return
	}
	timeout := a.heartbeat(req.TimeoutMs)
	rc := http.NewResponseController(w)
	var buf []byte
	started := false
	err := a.m.Stream(r.Context(), key(r), *req.Handle, timeout, req.Ack, func(l *streamLine) error {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			started = true
		}
		buf = l.appendTo(buf[:0])
		_, err := w.Write(buf)
		if buf = smallBuffer(buf); err != nil {
			return err
		}
		return rc.Flush() // one write per line: a batch of every message queued meanwhile
	})
	switch {
	case err == nil || r.Context().Err() != nil:
	case !started:
		writeError(w, err)
	default:
		buf = append(appendJSON(buf[:0], map[string]any{"error": asError(err)}), '\n')
		_, _ = w.Write(buf)
	}
}

func appendJSON(b []byte, v any) []byte {
	j, _ := json.Marshal(v)
	return append(b, j...)
}

func (a httpAPI) unsubscribe(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Handle *string `json:"handle"`
	}
	if !decode(w, r, &req) || !present(w, req.Handle, "handle") {
		return
	}
	ok, err := a.m.Unsubscribe(key(r), *req.Handle)
	reply(w, err, func() any { return map[string]any{"unsubscribed": ok} })
}

func (a httpAPI) close(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channel *string `json:"channel"`
		Reason  *string `json:"reason"`
	}
	if !decode(w, r, &req) || !present(w, req.Channel, "channel") {
		return
	}
	reason := ""
	if req.Reason != nil {
		reason = *req.Reason
	}
	n, err := a.m.CloseChannel(key(r), *req.Channel, reason)
	reply(w, err, func() any { return map[string]any{"notified": n} })
}

func (a httpAPI) subscribers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("channel") {
		writeError(w, newError(http.StatusBadRequest, CodeInvalidArgument, "query parameter channel is required"))
		return
	}
	n, err := a.m.SubscriberCount(key(r), q.Get("channel"))
	reply(w, err, func() any { return map[string]any{"subscribers": n} })
}

func (a httpAPI) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, newError(http.StatusNotFound, CodeInvalidArgument, "no channel API route %s %s (see docs/channels.md)", r.Method, r.URL.Path))
}

func key(r *http.Request) Key {
	return Key{Namespace: r.PathValue("namespace"), Object: r.PathValue("object")}
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, limitError(CodeMessageTooLarge, maxBodyBytes, "channel API request body limit", "request body over %d bytes", maxBodyBytes))
			return false
		}
		writeError(w, newError(http.StatusBadRequest, CodeInvalidArgument, "request body is not the JSON object this route takes: %v", err))
		return false
	}
	return true
}

func present(w http.ResponseWriter, s *string, field string) bool {
	if s == nil {
		writeError(w, newError(http.StatusBadRequest, CodeInvalidArgument, "field %s is required (a JSON string)", field))
		return false
	}
	return true
}

func reply(w http.ResponseWriter, err error, body func() any) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, body())
}

func writeError(w http.ResponseWriter, err error) {
	e := asError(err)
	writeJSON(w, e.Status, map[string]any{"error": e})
}

func asError(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: "INTERNAL", Message: fmt.Sprint(err), Status: http.StatusInternalServerError}
	}
	return e
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
