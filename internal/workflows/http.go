package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Handler serves the engine's HTTP API (docs/workflows.md). Errors are JSON
// {"error": {"code", "message"}} with a 4xx/5xx status.
func (e *Engine) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /workflows/_run/step", func(w http.ResponseWriter, r *http.Request) {
		var req StepRequest
		if e.decode(w, r, capStep, &req) {
			reply(w, 200, wrap(e.Step(req)))
		}
	})
	m.HandleFunc("POST /workflows/_run/attempt", func(w http.ResponseWriter, r *http.Request) {
		var req AttemptReport
		if e.decode(w, r, capAttempt, &req) {
			reply(w, 200, wrap(e.Attempt(req)))
		}
	})
	m.HandleFunc("POST /workflows/{wf}/instances", func(w http.ResponseWriter, r *http.Request) {
		var o api.CreateOptions
		if e.decode(w, r, capCreate, &o) {
			reply(w, 201, wrap(e.Create(r.PathValue("wf"), o)))
		}
	})
	m.HandleFunc("POST /workflows/{wf}/batch", e.serveBatch)
	m.HandleFunc("GET /workflows/{wf}/instances", e.serveList)
	m.HandleFunc("GET /workflows/{wf}/stats", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, wrap(e.Stats(r.PathValue("wf"))))
	})
	m.HandleFunc("GET /workflows/{wf}/instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, wrap(e.Get(r.PathValue("wf"), r.PathValue("id"))))
	})
	m.HandleFunc("GET /workflows/{wf}/instances/{id}/steps", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, wrap(e.Steps(r.PathValue("wf"), r.PathValue("id"), r.URL.Query().Get("cursor"))))
	})
	m.HandleFunc("DELETE /workflows/{wf}/instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, wrap(map[string]any{"deleted": r.PathValue("id")}, e.Delete(r.PathValue("wf"), r.PathValue("id"))))
	})
	for op, f := range map[string]func(string, string) (*api.Instance, error){
		"pause": e.Pause, "resume": e.Resume, "terminate": e.Terminate, "restart": e.Restart,
	} {
		m.HandleFunc("POST /workflows/{wf}/instances/{id}/"+op, func(w http.ResponseWriter, r *http.Request) {
			reply(w, 200, wrap(f(r.PathValue("wf"), r.PathValue("id"))))
		})
	}
	m.HandleFunc("POST /workflows/{wf}/instances/{id}/events", e.serveEvent)
	m.HandleFunc("POST /workflows/{wf}/bulk/{op}", e.serveBulk)
	return m
}

// serveBatch: createBatch with either instances (each with its id and params) or a
// count of instances sharing params.
func (e *Engine) serveBatch(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Instances []api.CreateOptions `json:"instances"`
		Count     int                 `json:"count"`
		Params    json.RawMessage     `json:"params"`
	}
	if !e.decode(w, r, capBatch, &b) {
		return
	}
	if b.Count != 0 && b.Instances != nil {
		replyErr(w, api.Errorf(400, "batch.invalid_options", "createBatch: give either count or instances, not both"))
		return
	}
	if b.Count != 0 {
		if b.Count < 1 || b.Count > 100 {
			replyErr(w, api.Errorf(400, "batch.invalid_size", "createBatch: count %d: want 1 to 100", b.Count))
			return
		}
		for range b.Count {
			b.Instances = append(b.Instances, api.CreateOptions{Params: b.Params})
		}
	}
	created, errs, err := e.CreateBatch(r.PathValue("wf"), b.Instances)
	if err != nil {
		replyErr(w, err)
		return
	}
	if errs == nil {
		errs = []api.BatchError{}
	}
	if created == nil {
		created = []*api.Instance{}
	}
	reply(w, 200, map[string]any{"created": created, "errors": errs})
}

func (e *Engine) serveList(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			replyErr(w, api.Errorf(400, "list.invalid_limit", "limit %q is not an integer", s))
			return
		}
		limit = n
	}
	reply(w, 200, wrap(e.List(r.PathValue("wf"), r.URL.Query().Get("status"), limit, r.URL.Query().Get("cursor"))))
}

func (e *Engine) serveEvent(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if e.decode(w, r, capEvent, &ev) {
		reply(w, 200, wrap(map[string]any{"ok": true}, e.SendEvent(r.PathValue("wf"), r.PathValue("id"), ev.Type, ev.Payload)))
	}
}

// serveBulk terminates or deletes up to 1000 instances, each on its own: the answer
// lists the ids done and an error per id that failed (api.BulkResult).
func (e *Engine) serveBulk(w http.ResponseWriter, r *http.Request) {
	var b struct {
		IDs []string `json:"ids"`
	}
	if !e.decode(w, r, capBulk, &b) {
		return
	}
	wf, op := r.PathValue("wf"), r.PathValue("op")
	if len(b.IDs) < 1 || len(b.IDs) > 1000 {
		replyErr(w, api.Errorf(400, "bulk.invalid_size", "bulk %s: %d ids; want 1 to 1000", op, len(b.IDs)))
		return
	}
	if op != "terminate" && op != "delete" {
		replyErr(w, api.Errorf(404, "bulk.unknown_op", "bulk operation %q: want terminate or delete", op))
		return
	}
	res := api.BulkResult{Done: []string{}, Errors: []api.BulkError{}}
	seen := map[string]bool{}
	for _, id := range b.IDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		var err error
		if op == "terminate" {
			_, err = e.Terminate(wf, id)
		} else {
			err = e.Delete(wf, id)
		}
		if err != nil {
			be := api.BulkError{ID: id, Code: "internal", Message: err.Error()}
			var ae *api.APIError
			if errors.As(err, &ae) {
				be.Code = ae.Code
			}
			res.Errors = append(res.Errors, be)
			continue
		}
		res.Done = append(res.Done, id)
	}
	reply(w, 200, res)
}

type result struct {
	v   any
	err error
}

func wrap[T any](v T, err error) result { return result{v, err} }

func reply(w http.ResponseWriter, status int, v any) {
	if res, ok := v.(result); ok {
		if res.err != nil {
			replyErr(w, res.err)
			return
		}
		v = res.v
	}
	writeJSON(w, status, v)
}

func replyErr(w http.ResponseWriter, err error) {
	var ae *api.APIError
	if !errors.As(err, &ae) {
		ae = &api.APIError{Status: 500, Code: "internal", Message: fmt.Sprintf("workflows: %v", err)}
	}
	writeJSON(w, ae.Status, map[string]any{"error": ae})
}

// writeJSON writes v without HTML escaping (stored JSON goes out as it came in, not up
// to six times longer).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
