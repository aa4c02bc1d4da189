// tail.js: the streaming tail worker of every user Worker (config `streamingTails`,
// docs/observability.md). workerd calls tailStream once per invocation of the Worker with
// its onset event and then the returned handler with each later event (log, exception,
// spanOpen/spanClose, attributes, return) up to the outcome. At the outcome it queues one
// summary record for the sidecar (env.SIDECAR, POST env.TAIL_PATH, a JSON array of
// records per batch), which turns them into Prometheus series and JSON log lines.
// env.WORKER is the Worker's name, env.VERSION the id of the version it runs
// (docs/versions.md).
//
// What an invocation logs after its response (a plain WebSocket's message listeners, a
// waitUntil, a stream's pump) is not held until its outcome, which may be hours away:
// each such log or exception goes at once as a partial record ("partial": true), which
// the sidecar writes as log lines and counts as logs, not as an invocation.
// Bounds per invocation, so one chatty invocation cannot make a huge record.
const MAX_LOGS = 256;
const MAX_SPANS = 64;
const MAX_EXCEPTIONS = 16;
const MAX_TEXT = 16 * 1024;
// LATE_OUTCOME_MS: how long logs made before the return wait for the outcome's record.
const LATE_OUTCOME_MS = 1000;

function text(parts) {
  const s = (Array.isArray(parts) ? parts : [parts])
    .map((p) => (typeof p === "string" ? p : safeJSON(p)))
    .join(" ");
  return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) : s;
}

// ms is an event timestamp (a Date) in milliseconds since the epoch.
function ms(t) {
  return t instanceof Date ? t.getTime() : new Date(t).getTime();
}

function safeJSON(v) {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

// trigger is the onset's event type; fetch is reported as "fetch", JS RPC as "rpc".
function trigger(info) {
  const t = info && info.type ? info.type : "unknown";
  return t === "jsrpc" ? "rpc" : t;
}

function newRecord(onset, env) {
  const ev = onset.event;
  return {
    worker: env.WORKER || "",
    version: env.VERSION || "",
    entrypoint: ev.entrypoint || "default",
    executionModel: ev.executionModel || "",
    trigger: trigger(ev.info),
    method: "",
    cron: ev.info && typeof ev.info.cron === "string" ? ev.info.cron : "",
    outcome: "",
    status: 0,
    start: ms(onset.timestamp),
    wallMs: 0,
    cpuMs: 0,
    invocationId: onset.invocationId || "",
    traceId: (onset.spanContext && onset.spanContext.traceId) || "",
    spanId: ev.spanId || "",
    parentSpanId: (onset.spanContext && onset.spanContext.spanId) || "",
    // The invocation's own spans: its root, and in an RPC invocation the server side of
    // the call (jsRpcCall), under which the method's own calls open.
    own: [ev.spanId || ""],
    subrequests: {},
    spans: [],
    logs: [],
    exceptions: [],
    dropped: 0,
    // responded: the invocation's return event has been seen (logs go out at once).
    responded: false,
  };
}

// partial sends what rec logged since its last record as a record of its own, marked
// partial, and starts rec's logs and exceptions afresh.
function partial(rec, env) {
  const { responded, own, spans, subrequests, ...rest } = rec;
  const out = { ...rest, partial: true, subrequests: {}, spans: [] };
  rec.logs = [];
  rec.exceptions = [];
  rec.dropped = 0;
  return send(out, env);
}

// span notes a spanOpen (a subrequest when its parent is the invocation's own span) or
// closes an open one.
function span(rec, ev, item, open) {
  const at = ms(item.timestamp);
  if (open) {
    const parent = (item.spanContext && item.spanContext.spanId) || "";
    if (rec.trigger === "rpc" && ev.name === "jsRpcCall" && rec.own.length === 1 && parent === rec.spanId) {
      rec.own.push(ev.spanId);
      return;
    }
    if (rec.own.includes(parent)) rec.subrequests[ev.name] = (rec.subrequests[ev.name] || 0) + 1;
    if (rec.spans.length < MAX_SPANS) rec.spans.push({ name: ev.name, spanId: ev.spanId, parent, start: at, end: 0, outcome: "" });
    else rec.dropped++;
    return;
  }
  const id = item.spanContext && item.spanContext.spanId;
  const s = rec.spans.find((x) => x.spanId === id);
  if (s) {
    s.end = at;
    s.outcome = ev.outcome || "";
  }
}

function onEvent(rec, item, env) {
  const ev = item.event;
  switch (ev.type) {
    case "log":
      if (rec.logs.length < MAX_LOGS) rec.logs.push({ at: ms(item.timestamp), level: ev.level, message: text(ev.message) });
      else rec.dropped++;
      return rec.responded ? partial(rec, env) : null;
    case "exception":
      if (rec.exceptions.length < MAX_EXCEPTIONS) rec.exceptions.push({ at: ms(item.timestamp), name: String(ev.name || "Error"), message: text(ev.message || ""), stack: text(ev.stack || "") });
      else rec.dropped++;
      return rec.responded ? partial(rec, env) : null;
    case "spanOpen":
      span(rec, ev, item, true);
      return null;
    case "spanClose":
      span(rec, ev, item, false);
      return null;
    case "attributes":
      // Only the invocation's own attributes: a subrequest's name its callee's method.
      if (!rec.own.includes(item.spanContext && item.spanContext.spanId)) return null;
      for (const a of ev.info || []) if (a.name === "jsrpc.method" && !rec.method) rec.method = String(a.value);
      return null;
    case "return":
      if (ev.info && typeof ev.info.statusCode === "number") rec.status = ev.info.statusCode;
      rec.responded = true;
      // Some invocations report their outcome long after their return (a hibernatable
      // WebSocket's close handler): what they logged goes out if the outcome is late.
      if (rec.logs.length + rec.exceptions.length > 0) {
        setTimeout(() => {
          if (rec.responded && rec.logs.length + rec.exceptions.length > 0) partial(rec, env);
        }, LATE_OUTCOME_MS);
      }
      return null;
    case "outcome":
      delete rec.responded;
      rec.outcome = ev.outcome;
      rec.cpuMs = ev.cpuTime || 0;
      // workerd reports wallTime 0; the span of the invocation is the distance from
      // the onset to the outcome on workerd's clock.
      rec.wallMs = ev.wallTime || Math.max(0, ms(item.timestamp) - rec.start);
      return send(rec, env);
    default:
      return null;
  }
}

// Records wait here, serialised (module scope: shared by the invocations of this
// isolate) and go to the sidecar in batches: one POST per BATCH_MS, or sooner once
// MAX_BATCH records or MAX_BATCH_CHARS characters of JSON wait. A batch holds at most
// MAX_BATCH records and, past its first record, MAX_BATCH_CHARS characters: at most
// 12 MiB plus one record, within the sidecar's 64 MiB per batch (telemetry.MaxBatchBytes).
// The first invocation that finds no flush pending carries the flush.
const BATCH_MS = 25;
const MAX_BATCH = 256;
const MAX_BATCH_CHARS = 4 * 1024 * 1024;
let queue = [];
let queuedChars = 0;
// flushing is when the running flush last made progress (ms since the epoch), 0 with
// none. A flush started by the late-outcome timer is awaited by nobody: if its tail
// session ends under it, it never finishes. So one that made no progress for STUCK_MS is
// taken for gone and the next record starts another (the batch it held is lost).
const STUCK_MS = 5000;
let flushing = 0;
let flusher = null;

function send(rec, env) {
  const s = JSON.stringify(rec);
  queue.push(s);
  queuedChars += s.length;
  if (flushing !== 0 && Date.now() - flushing < STUCK_MS) return null;
  flushing = Date.now();
  return flush(env);
}

// nextBatch takes the records of the next POST off the queue.
function nextBatch() {
  let n = 0;
  let chars = 0;
  while (n < queue.length && n < MAX_BATCH && (n === 0 || chars + queue[n].length <= MAX_BATCH_CHARS)) {
    chars += queue[n].length;
    n++;
  }
  queuedChars -= chars;
  return queue.splice(0, n);
}

async function flush(env) {
  const me = {};
  flusher = me;
  try {
    while (queue.length > 0) {
      if (queue.length < MAX_BATCH && queuedChars < MAX_BATCH_CHARS) await new Promise((r) => setTimeout(r, BATCH_MS));
      if (flusher === me) flushing = Date.now();
      const batch = nextBatch();
      try {
        const res = await env.SIDECAR.fetch("http://sidecar" + env.TAIL_PATH, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "[" + batch.join(",") + "]",
        });
        await res.body?.cancel();
      } catch {
        // The sidecar is down (restarting): the batch is lost, the Worker is unaffected.
      }
    }
  } finally {
    if (flusher === me) {
      flushing = 0;
      flusher = null;
    }
  }
}

export default {
  tailStream(onset, env) {
    const rec = newRecord(onset, env);
    return (item) => onEvent(rec, item, env);
  },
};
