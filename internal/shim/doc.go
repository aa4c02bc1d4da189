// Package shim holds the small JavaScript Workers the operator injects into every
// rendered workerd config next to the user's Worker, embedded into the binary.
//
// Files (all *.js files of this directory are embedded; other packages add their own,
// e.g. channels*.js, failure*.js):
//   - health.js: the worker behind the `health` socket (port 9090, docs/pod-contract.md).
//     GET /healthz → 200 "ok" (liveness; answered inside the workerd process, so an
//     isolate stuck in a busy loop fails it because workerd runs its isolates on one
//     thread). GET /readyz → asks the sidecar (binding SIDECAR, the `external` service
//     "sidecar") for GET /healthz: 200 "ready" when the sidecar answers 2xx, else 503
//     with "not ready: sidecar ..." naming the status or the connection error. Without
//     a sidecar (as in `render --check` or unit tests) readiness therefore fails
//     clearly while liveness succeeds. Anything else → 404.
//   - trigger.js: the worker behind the `trigger` socket (port 9091). It has the
//     compatibility flag service_binding_extra_handlers (experimental, so workerd runs
//     with --experimental) and a service binding TARGET to the user's Worker.
//     POST /scheduled {"cron":"<expr>","scheduledTime":<ms since epoch>} →
//     env.TARGET.scheduled({cron, scheduledTime: new Date(ms)}) → 200
//     {"outcome":"<outcome>","noRetry":<bool>} whatever the outcome; a malformed
//     request → 400 {"error":"..."}. GET /cdn-cgi/local/scheduled?cron=&time=[&format=json]
//     (and the old /cdn-cgi/handler/scheduled): 200 "ok" or 500 "<outcome>", or the JSON
//     above with format=json. time defaults to now, cron to "". POST /scheduled-batch
//     {"runs":[{"cron","scheduledTime"}, ...]} (1..1000) starts every run at once and
//     streams 200 application/x-ndjson, one {"index","outcome","noRetry"} line per run
//     as it finishes (docs/pod-contract.md); the cron dispatcher sends one per pod per
//     slot.
//   - tail.js: the streaming tail worker of the user's Worker (its `streamingTails`):
//     summarises each invocation's events (handler, entrypoint, outcome, status, wall
//     time, spans, console.* calls, exceptions) and posts them in batches to the
//     sidecar's podcontract.TailPath (docs/observability.md).
package shim
