package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// MaxResponseBytes caps a listing's answer: a page ends before the instance that would
// take it over (the first always fits: one instance is at most its params, its output
// and its error, about 2 MiB), and its cursor continues from there. A project decision
// bounding the sidecar's memory (docs/workflows.md).
const MaxResponseBytes = 4 << 20

// envelope is what a body may hold besides the documented payload it carries (ids,
// names, types, error text, JSON framing).
const envelope = 64 << 10

// capSource names where the caps that no Cloudflare limit sets come from.
const capSource = "project decision, docs/workflows.md: request bodies of the engine API"

// bodyCap is a route's request body limit: the limit of the payload it carries (when
// one is documented) plus envelope, or a fixed number of bytes.
type bodyCap struct {
	limit limits.Name // "" for a fixed cap
	fixed int64
}

var (
	capCreate  = bodyCap{limit: limits.WorkflowParamsBytes}
	capEvent   = bodyCap{limit: limits.WorkflowParamsBytes}
	capBatch   = bodyCap{limit: limits.WorkflowBatchBytes}
	capAttempt = bodyCap{limit: limits.WorkflowStepResultBytes}
	capStep    = bodyCap{fixed: envelope}            // names of ≤ 256 characters, a step config, a duration
	capBulk    = bodyCap{fixed: 1000*(100+3) + 4096} // 1000 ids of ≤ 100 characters, quoted
)

// capOf is the cap in bytes and the text an error about it carries.
func (e *Engine) capOf(c bodyCap) (int64, string) {
	if c.limit == "" {
		return c.fixed, fmt.Sprintf("%d bytes (source: %s)", c.fixed, capSource)
	}
	v := e.lim(c.limit)
	return v + envelope, fmt.Sprintf("%d bytes: %d for the payload (%s) and %d for the other fields", v+envelope, v, e.cite(c.limit), envelope)
}

// decode reads r's JSON body into v, refusing a body over c with 413: at once when its
// declared length is over, else after reading one byte past the cap.
func (e *Engine) decode(w http.ResponseWriter, r *http.Request, c bodyCap, v any) bool {
	max, why := e.capOf(c)
	tooLarge := func(n string) bool {
		replyErr(w, api.Errorf(413, "request.too_large", "request body of %s %s is %s; the limit is %s", r.Method, r.URL.Path, n, why))
		return false
	}
	if r.ContentLength > max {
		return tooLarge(fmt.Sprintf("%d bytes", r.ContentLength))
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(fmt.Sprintf("over %d bytes", max))
		}
		replyErr(w, api.Errorf(400, "request.unreadable", "request body: %v", err))
		return false
	}
	if len(b) == 0 {
		b = []byte("{}")
	}
	if err := json.Unmarshal(b, v); err != nil {
		replyErr(w, api.Errorf(400, "request.invalid_json", "request body is not the expected JSON: %v", err))
		return false
	}
	return true
}
