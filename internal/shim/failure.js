// failure.js: the JavaScript twin of internal/failure (Go), for the router and the
// workflow step runtime. Same rules, same order, same results: both are driven by
// internal/failure/testdata/vectors.json, and internal/failure's tests run this module
// inside the pinned workerd and compare it with Go on every vector. Change both together.
//
// Taxonomy: the Durable Object call classes and failure causes of docs/failures.md, plus
// startup_error and config_error for workerd's `service <name>: ...` lines.
// docs/failures.md says what produces each cause and what the operator does about it.
//
// Exports:
//   classifyCall(err)        -> class string: "superseded_isolate" | "connection_lost" |
//                               "storage_reset" | "retryable_flag" | "overloaded" |
//                               "permanent"; "" for null/undefined (no failure).
//   isRetryable(cls)         -> boolean: true only for the four transient classes;
//                               never for "overloaded" or "permanent".
//   classifyError(err)       -> cause string (docs/failures.md) from the messages of err's
//                               cause chain; a string is classified as a message.
//   classifyMessage(msg)     -> cause string from one message or log line.
//   classifyTermination(t)   -> cause string from {exitCode, signal, reason, message,
//                               logs, podReason} (the Go Termination).
//   backoff(n, baseMs, maxMs) -> ms before retry n (n >= 1): baseMs*2^(n-1), capped.
//   callWithRetry(call, {attempts = 3, baseMs = 100, maxMs = 10000})
//                            -> call()'s value; retries while classifyCall(error) is
//                               retryable (never "overloaded"/"permanent"), at most
//                               `attempts` calls, waiting backoff(n) between; rethrows
//                               the last error unchanged. `call` must mint a fresh stub.
//   CLASSES, CAUSES          -> the value lists.

export const CLASSES = Object.freeze([
  "superseded_isolate", "connection_lost", "storage_reset", "retryable_flag", "overloaded", "permanent",
]);

export const CAUSES = Object.freeze([
  "sqlite_nomem", "sqlite_full", "oom", "cpu_exceeded", "clone_refused", "rpc_timeout",
  "subrequest_cap", "dynamic_worker_cap", "condemnation", "hard_evict",
  "startup_error", "config_error", "image_link_outside", "unknown",
]);

// IMAGE_LINK_PHRASE: in every line of the image-check init container (ImageLinkPhrase
// in internal/failure/failure.go).
const IMAGE_LINK_PHRASE = "is a symbolic link out of its image volume";

const RETRYABLE = new Set(["superseded_isolate", "connection_lost", "storage_reset", "retryable_flag"]);

// isRetryable: whether a retry (with backoff, on a fresh stub) may act on class cls.
export function isRetryable(cls) {
  return RETRYABLE.has(cls);
}

// A rule matches a lower-cased message: any of `sub`, any of `re`, or all of `all`.
function match(rule, m) {
  if (rule.sub && rule.sub.some((s) => m.includes(s))) return true;
  if (rule.re && rule.re.some((r) => r.test(m))) return true;
  if (rule.all && rule.all.length > 0) return rule.all.every((s) => m.includes(s));
  return false;
}

const HEAP_RULE = { sub: ["javascript heap out of memory", "reached heap limit", "last resort; gc in old space requested"] };

// Ordered; first match wins. Mirrors causeRules in internal/failure/failure.go.
const CAUSE_RULES = [
  ["sqlite_nomem", { sub: ["sqlite_nomem"] }],
  ["sqlite_full", { sub: ["sqlite_full", "database or disk is full"] }],
  ["oom", HEAP_RULE],
  ["oom", {
    sub: ["exceededmemory", "memory limit exceeded", "memory limit would be exceeded"],
    re: [/exceeded (?:its )?memory limit/],
    all: ["memory limit", "reset"],
  }],
  ["sqlite_nomem", { sub: ["out of memory"] }],
  ["clone_refused", { sub: ["deserialize cloned data", "could not be cloned"] }],
  ["subrequest_cap", { sub: ["too many subrequests"] }],
  ["dynamic_worker_cap", { sub: ["too many concurrent dynamic workers"] }],
  ["cpu_exceeded", { sub: ["cpu time limit", "exceeded cpu limit", "exceededcpu"] }],
  ["rpc_timeout", { sub: ["timeouterror"], re: [/\btimed?\s*out\b/] }],
  ["condemnation", { sub: ["condemned"] }],
  ["hard_evict", { sub: ["hard evict"] }],
  ["outbound_denied", { re: [/connecting to \S+ is not allowed/] }],
];

// classifyMessage: the cause one message names (case ignored); "unknown" when none.
export function classifyMessage(msg) {
  const m = String(msg ?? "").toLowerCase();
  if (m === "") return "unknown";
  for (const [cause, rule] of CAUSE_RULES) {
    if (match(rule, m)) return cause;
  }
  return "unknown";
}

const MAX_CHAIN = 64;

// walk visits err and its causes depth-first, pre-order (cause, then an
// AggregateError's errors), at most MAX_CHAIN links, cycle-guarded; stops when visit
// returns false. Links are objects; a bare string top-level input is a message.
function walk(err, visit) {
  const seen = new Set();
  let n = 0;
  const rec = (e) => {
    if (e === null || e === undefined) return true;
    if (typeof e !== "object" && typeof e !== "function") {
      if (n > 0) return true; // a non-object cause is not a link
      e = { message: String(e) };
    }
    if (seen.has(e) || n >= MAX_CHAIN) return n < MAX_CHAIN;
    seen.add(e);
    n++;
    if (!visit(e)) return false;
    if (e.cause !== undefined && e.cause !== null && typeof e.cause === "object") {
      if (!rec(e.cause)) return false;
    }
    if (Array.isArray(e.errors)) {
      for (const c of e.errors) {
        if (c !== null && typeof c === "object" && !rec(c)) return false;
      }
    }
    return true;
  };
  rec(err);
}

function linkMessage(e) {
  return typeof e.message === "string" ? e.message : "";
}

// classifyError: the cause named by the messages of err's whole chain, "; "-joined.
export function classifyError(err) {
  const msgs = [];
  walk(err, (e) => { msgs.push(linkMessage(e)); return true; });
  return classifyMessage(msgs.join("; "));
}

const OVERLOAD_RULE = {
  sub: ["durable object is overloaded", "too much load on durable objects", "too many concurrent storage operations"],
};

// Ordered; matched against the joined chain. Mirrors classRules in failure.go.
const CLASS_RULES = [
  ["superseded_isolate", { sub: ["reset because its code was updated", "this script has been upgraded"] }],
  ["connection_lost", { sub: ["network connection lost", "this durable object instance is no longer active", "durable object connection closed because the object was reset"] }],
  ["storage_reset", {
    sub: ["durable object storage caused object to be reset"],
    re: [/storage operation exceeded timeout which caused (?:the )?object to be reset/],
  }],
];

// classifyCall: how a failed Durable Object call relates to a retry. Any overloaded
// link (`.overloaded === true` or a load-shedding text) vetoes everything; then the
// joined prose names a transient class; then any `.retryable === true` link gives
// "retryable_flag"; else "permanent".
export function classifyCall(err) {
  if (err === null || err === undefined) return "";
  let overloaded = false;
  let flagged = false;
  const msgs = [];
  walk(err, (e) => {
    const msg = linkMessage(e);
    if (e.overloaded === true || match(OVERLOAD_RULE, msg.toLowerCase())) {
      overloaded = true;
      return false;
    }
    if (e.retryable === true) flagged = true;
    msgs.push(msg);
    return true;
  });
  if (overloaded) return "overloaded";
  const chain = msgs.join("; ").toLowerCase();
  for (const [cls, rule] of CLASS_RULES) {
    if (match(rule, chain)) return cls;
  }
  return flagged ? "retryable_flag" : "permanent";
}

const SERVICE_LINE = /^service ([^\s:]+): (.+)$/;
const CAPNP_LINE = /^\S+\.capnp:\d+:\d+(?:-\d+)?: (.+)$/;
const SIGNAL_LINE = /\*\*\* received signal #(\d+)/;
const STARTUP_RULE = { sub: ["script startup threw exception", "script startup exceeded resource limits"] };
const CONFIG_RULE = { sub: ["can't start server due to config errors"] };

// terminationLines: message and logs split into lines; a structured JSON log line is
// replaced by its "message" lines; blank lines dropped.
function terminationLines(t) {
  const out = [];
  const add = (text) => {
    for (let l of String(text ?? "").split("\n")) {
      l = l.replace(/\r+$/, "");
      if (l.trim() === "") continue;
      if (l.trim().startsWith("{")) {
        let obj;
        try { obj = JSON.parse(l.trim()); } catch { obj = undefined; }
        if (obj !== null && typeof obj === "object" && !Array.isArray(obj) && typeof obj.message === "string") {
          for (const ml of obj.message.split("\n")) {
            if (ml.trim() !== "") out.push(ml.replace(/\r+$/, ""));
          }
          continue;
        }
      }
      out.push(l);
    }
  };
  add(t.message);
  for (const l of t.logs ?? []) add(l);
  return out;
}

// classifyTermination: the cause of a container's termination. Steps, first answer wins
// (see Diagnose in internal/failure/termination.go): Evicted pod -> hard_evict;
// OOMKilled -> oom; image-check line -> image_link_outside; V8 heap line -> oom; workerd config loader lines -> config_error,
// else `service <name>: Uncaught ...` -> startup_error; message rules; signal 9 or 6
// (Signal, exitCode-128, or "*** Received signal #n") -> oom; else "unknown".
export function classifyTermination(t) {
  t = t ?? {};
  const lines = terminationLines(t);
  if (t.podReason === "Evicted") return "hard_evict";
  if (t.reason === "OOMKilled") return "oom";
  if (lines.some((l) => l.includes(IMAGE_LINK_PHRASE))) return "image_link_outside";
  if (lines.some((l) => match(HEAP_RULE, l.toLowerCase()))) return "oom";
  let startup = false;
  for (const l of lines) {
    const low = l.toLowerCase();
    const m = SERVICE_LINE.exec(l);
    if (m) {
      if (m[2].startsWith("Uncaught ")) { startup = true; continue; }
      return "config_error";
    }
    if (CAPNP_LINE.test(l) || match(CONFIG_RULE, low)) return "config_error";
    if (match(STARTUP_RULE, low)) startup = true;
  }
  if (startup) return "startup_error";
  const c = classifyMessage(lines.join("\n"));
  if (c !== "unknown") return c;
  const exitCode = Number(t.exitCode ?? 0);
  let sig = Number(t.signal ?? 0);
  if (sig === 0 && exitCode > 128 && exitCode <= 128 + 64) sig = exitCode - 128;
  if (sig === 0) {
    for (const l of lines) {
      const s = SIGNAL_LINE.exec(l.toLowerCase());
      if (s) { sig = Number(s[1]); break; }
    }
  }
  if (sig === 9 || sig === 6) return "oom";
  return "unknown";
}

// backoff: milliseconds before retry n (n >= 1): baseMs*2^(n-1), capped at maxMs; no
// jitter. Mirrors Backoff in internal/failure/retry.go.
export function backoff(n, baseMs, maxMs) {
  if (!(n >= 1) || !(baseMs > 0)) return 0;
  return Math.min(baseMs * 2 ** (n - 1), maxMs);
}

// callWithRetry: a retry loop over classifyCall with the operator's defaults (3 attempts,
// 100 ms then 200 ms, 10 s cap). Mirrors Retry in internal/failure/retry.go. Throws a
// RangeError naming the option when attempts < 1, baseMs < 0 or maxMs < baseMs.
export async function callWithRetry(call, { attempts = 3, baseMs = 100, maxMs = 10000 } = {}) {
  if (!Number.isInteger(attempts) || attempts < 1) {
    throw new RangeError(`callWithRetry: attempts is ${attempts}, must be an integer >= 1 (1 = no retry)`);
  }
  if (!(baseMs >= 0)) throw new RangeError(`callWithRetry: baseMs is ${baseMs}, must be >= 0`);
  if (!(maxMs >= baseMs)) throw new RangeError(`callWithRetry: maxMs is ${maxMs}, must be >= baseMs (${baseMs})`);
  for (let n = 1; ; n++) {
    try {
      return await call(n);
    } catch (err) {
      if (n >= attempts || !isRetryable(classifyCall(err))) throw err;
      const ms = backoff(n, baseMs, maxMs);
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
  }
}
