// The `step` object handed to a WorkflowEntrypoint's run(event, step) by
// workflows-runner.js (engine: internal/workflows). Every call asks the sidecar's
// engine over the run's socket (Link, op "step") first: a completed step is answered
// from the engine's store (replay), a new step.do runs its callback and its result is
// committed (op "attempt") before step.do returns. When the engine says "suspend"
// (sleep, waitForEvent without an event, a retry delay, a pause) the call never settles
// and the runner ends the run; nothing is thrown into user code, so a try/catch around a
// wait cannot swallow a suspension. The run ends only once every step.do attempt in
// flight (Promise.all) has been reported, so a pause never drops a finished callback's
// result; no new attempt starts after that. Occurrence counts per (kind, name) make the
// cache key.
import { RpcTarget } from "cloudflare:workers";

export class StepAbort extends Error {}

// Link is a run's WebSocket to the engine: the job arrives first (link.job); ask()
// sends {call, op, ...body} and resolves with the engine's {call, answer} or {call, error},
// or null once the socket is gone. Each question also carries lag: how late (ms) the last
// answer was handled after the engine sent it at its "t", which the engine uses to start
// no more runs than workerd keeps up with.
export class Link {
  #ws; #next = 1; #waiting = new Map(); #gotJob; #closed = false; #lag;
  constructor(ws) {
    this.#ws = ws;
    this.job = new Promise((resolve, reject) => { this.#gotJob = { resolve, reject }; });
    ws.addEventListener("message", (ev) => this.#receive(ev.data));
    ws.addEventListener("close", () => this.#gone());
    ws.addEventListener("error", () => this.#gone());
  }

  #receive(data) {
    if (typeof data !== "string") return;
    const m = JSON.parse(data);
    if (typeof m.t === "number") this.#lag = Math.max(0, Date.now() - m.t);
    if (this.#gotJob) { this.#gotJob.resolve(m); this.#gotJob = null; return; }
    const w = this.#waiting.get(m.call);
    if (w) { this.#waiting.delete(m.call); w(m); }
  }

  #gone() {
    this.#closed = true;
    if (this.#gotJob) { this.#gotJob.reject(new Error("the engine closed the run's socket")); this.#gotJob = null; }
    for (const w of this.#waiting.values()) w(null);
    this.#waiting.clear();
  }

  ask(op, body) {
    if (this.#closed) return Promise.resolve(null);
    const call = this.#next++;
    return new Promise((resolve) => {
      this.#waiting.set(call, resolve);
      const lag = this.#lag;
      this.#lag = undefined;
      try { this.#ws.send(JSON.stringify({ call, op, lag, ...body })); }
      catch { this.#waiting.delete(call); resolve(null); }
    });
  }

  // end sends the run's outcome (none when the run could not start) and closes.
  end(outcome) {
    try {
      if (outcome && !this.#closed) this.#ws.send(JSON.stringify({ op: "outcome", ...outcome }));
      this.#ws.close(1000, "run ended");
    } catch {}
  }
}

export class Step extends RpcTarget {
  #link; #counts = new Map(); #stopped = null; #stop; #inflight = 0;
  constructor(link, job) {
    super();
    this.#link = link;
    this.stopPromise = new Promise((resolve) => { this.#stop = resolve; });
  }

  get stopped() { return this.#stopped; }

  // halt ends the run with outcome ("suspended" | "aborted") once no attempt is in
  // flight, and never settles.
  #halt(outcome) {
    if (!this.#stopped) this.#stopped = outcome;
    this.#settle();
    return new Promise(() => {});
  }

  #settle() {
    if (this.#stopped && this.#inflight === 0) this.#stop(this.#stopped);
  }

  #count(kind, name) {
    const k = kind + "\u0000" + name;
    const n = (this.#counts.get(k) || 0) + 1;
    this.#counts.set(k, n);
    return n;
  }

  // call asks the engine; after the run stopped only attempt reports still go out.
  async #call(op, body) {
    if (this.#stopped && op !== "attempt") return this.#halt(this.#stopped);
    const m = await this.#link.ask(op, body);
    // no answer (the engine is gone: it replays when it is back) or an error: abort
    if (!m || !m.answer) return this.#halt("aborted");
    return m.answer;
  }

  #answer(ans) {
    switch (ans.action) {
      case "cached": return ans.result;
      case "throw": throw deliveredError(ans.error);
      case "suspend": return this.#halt("suspended");
      default: return this.#halt("aborted");
    }
  }

  async do(name, config, fn) {
    if (typeof config === "function" && fn === undefined) { fn = config; config = undefined; }
    if (typeof fn !== "function") throw new TypeError(`step.do("${name}"): the last argument must be a function`);
    name = String(name);
    checkStepName(name);
    const problem = stepConfigProblem(config);
    if (problem) throw fatal(`Step config for "${name}" is in a invalid format: ${problem}. See ${CONFIG_DOCS}`);
    const count = this.#count("do", name);
    const delayFn = typeof config?.retries?.delay === "function" ? config.retries.delay : undefined;
    let cfg;
    try { cfg = config === undefined ? undefined : JSON.parse(JSON.stringify(config)); }
    catch (e) { throw fatal(`Step config for "${name}" is in a invalid format: ${e.message}. See ${CONFIG_DOCS}`); }
    let ans = await this.#call("step", { kind: "do", name, count, config: cfg });
    while (ans.action === "run") {
      if (this.#stopped) return this.#halt(this.#stopped);
      this.#inflight++;
      try {
        const ctx = { step: { name, count }, attempt: ans.attempt, config: configAsGiven(ans.config, cfg, delayFn) };
        let report = await attempt(ctx, ans, fn);
        if (delayFn && willRetry(report, ans)) report = await withDelay(report, delayFn, ctx);
        ans = await this.#call("attempt", { name, count, attempt: ans.attempt, ...clipError(report) });
      } finally {
        this.#inflight--;
      }
      if (this.#stopped) return this.#halt(this.#stopped);
    }
    return this.#answer(ans);
  }

  async sleep(name, duration) {
    name = String(name);
    const count = this.#count("sleep", name);
    return this.#answer(await this.#call("step", { kind: "sleep", name, count, duration }));
  }

  async sleepUntil(name, timestamp) {
    name = String(name);
    const count = this.#count("sleep", name);
    const until = timestamp instanceof Date ? timestamp.getTime() : Number(timestamp);
    return this.#answer(await this.#call("step", { kind: "sleepUntil", name, count, until }));
  }

  async waitForEvent(name, options) {
    name = String(name);
    const count = this.#count("waitForEvent", name);
    const ans = await this.#call("step", { kind: "waitForEvent", name, count, type: options?.type, timeout: options?.timeout });
    const v = this.#answer(ans);
    if (v && typeof v === "object" && "timestamp" in v) v.timestamp = new Date(v.timestamp);
    return v;
  }
}

// attempt runs one attempt of a step.do callback and returns its report.
async function attempt(ctx, ans, fn) {
  const name = ctx.step.name;
  try {
    const value = await withTimeout(Promise.resolve().then(() => fn(ctx)), ans.timeoutMs, ans.config?.timeout)
      .catch((e) => { throw e?.name === "DataCloneError" ? notSerialisable(name) : e; }); // a value RPC could not carry back
    let json;
    try { json = value === undefined ? undefined : (checkSerialisable(value), JSON.stringify(value)); }
    catch (e) { throw notSerialisable(name); }
    const bytes = json === undefined ? 0 : new TextEncoder().encode(json).length;
    if (ans.maxResultBytes && bytes > ans.maxResultBytes) return { ok: true, resultBytes: bytes }; // the engine fails it as too large
    return { ok: true, result: json === undefined ? undefined : JSON.parse(json) };
  } catch (e) {
    if (e instanceof NotSerialisable) return { ok: false, fatal: true, error: { name: "WorkflowFatalError", message: e.message } };
    return { ok: false, error: { name: String(e?.name ?? "Error"), message: String(e?.message ?? e) } };
  }
}

// A step value that cannot be stored ends the instance, errored with a
// WorkflowFatalError that run() cannot catch, as the pinned workerd's own engine does
// (internal/workflows TestMatchesBuiltInEngine).
class NotSerialisable extends Error {}
function notSerialisable(name) {
  return new NotSerialisable(`The execution of the Workflow instance was terminated, as the step "${name}" returned a value which is not serialisable`);
}

// configAsGiven is the step's config as its callback sees it: the config given merged
// over the engine's resolved one, values as given ("1 second" stays a string), and no
// retries.delay when it is a function, as Cloudflare's engine merges it over its defaults
// (workers-sdk packages/workflows-shared/src/context.ts).
function configAsGiven(resolved, given, delayFn) {
  const c = { ...resolved, ...given, retries: { ...resolved?.retries, ...given?.retries } };
  if (delayFn) delete c.retries.delay;
  return c;
}

// checkSerialisable throws on a function or Symbol anywhere in v, which JSON.stringify
// would drop silently: Cloudflare fails such a step
// (https://developers.cloudflare.com/workflows/build/rules-of-workflows/).
function checkSerialisable(v, seen = new Set()) {
  if (typeof v === "function" || typeof v === "symbol") throw new NotSerialisable("");
  if (v === null || typeof v !== "object" || seen.has(v)) return;
  seen.add(v);
  for (const k of Object.keys(v)) checkSerialisable(v[k], seen);
  seen.delete(v);
}

// Cloudflare's checks of a step.do call (its name and config), made before anything
// runs; the values of durations, the retry limit and the backoff are the engine's to check.
const CONFIG_DOCS = "https://developers.cloudflare.com/workflows/build/sleeping-and-retrying/";
const MAX_STEP_NAME_LENGTH = 256;

function fatal(message) { return deliveredError({ name: "WorkflowFatalError", message }); }

function checkStepName(name) {
  if (name.length > MAX_STEP_NAME_LENGTH || /[\x00-\x1F]/.test(name)) {
    throw fatal(`Step name "${name}" exceeds max length (${MAX_STEP_NAME_LENGTH} chars) or invalid characters found`);
  }
}

function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

// stepConfigProblem names what is wrong with a step.do config, or returns "".
function stepConfigProblem(config) {
  if (config === undefined || config === null) return "";
  if (!isObject(config)) return "the config must be an object {retries, timeout, sensitive}";
  for (const k of Object.keys(config)) {
    if (!["retries", "timeout", "sensitive"].includes(k)) return `unknown key "${k}"`;
  }
  const t = config.timeout;
  if (t !== undefined) {
    if (typeof t !== "number" && typeof t !== "string") return "timeout must be a number of milliseconds or a duration string";
    if (t == 0 || (typeof t === "number" && !(t > 0))) return `timeout ${JSON.stringify(t)} must be more than 0`;
  }
  if (config.sensitive !== undefined && config.sensitive !== "output") return `sensitive must be "output"`;
  return config.retries === undefined ? "" : retriesProblem(config.retries);
}

function retriesProblem(r) {
  if (!isObject(r)) return "retries must be an object {limit, delay, backoff}";
  for (const k of Object.keys(r)) {
    if (!["limit", "delay", "backoff"].includes(k)) return `retries.${k} is not a retries key (limit, delay, backoff)`;
  }
  if (r.limit === undefined) return "retries.limit is required";
  if (typeof r.limit !== "number" || !(r.limit >= 0)) return "retries.limit must be a number >= 0";
  if (r.delay === undefined) return "retries.delay is required";
  const d = r.delay;
  if (typeof d === "number" ? !(d >= 0) : typeof d !== "string" && typeof d !== "function") {
    return "retries.delay must be a number of milliseconds >= 0, a duration string or a function";
  }
  return "";
}

// willRetry: a failed attempt that the engine will retry (as it decides in Attempt).
function willRetry(report, ans) {
  return !report.ok && !report.nonRetryable && !report.fatal && report.error?.name !== "NonRetryableError" && ans.attempt <= (ans.config?.retries?.limit ?? 0);
}

const DELAY_FUNCTION_TIMEOUT_MS = 5000;

// withDelay asks a retries.delay function for the delay after a failed attempt; the
// engine applies the backoff to what it returns. A function that throws or does not
// return within 5 seconds fails the step for good.
async function withDelay(report, delayFn, ctx) {
  const { name, count } = ctx.step;
  const timedOut = {};
  let t;
  try {
    const late = new Promise((_, reject) => { t = setTimeout(() => reject(timedOut), DELAY_FUNCTION_TIMEOUT_MS); });
    const delay = await Promise.race([Promise.resolve().then(() => delayFn({ ctx, error: makeError(report.error) })), late]);
    return { ...report, retryDelay: delay === undefined ? null : delay };
  } catch (e) {
    const why = e === timedOut ? `did not return within ${DELAY_FUNCTION_TIMEOUT_MS / 1000} seconds` : `threw an error: ${e?.message ?? e}`;
    return { ok: false, nonRetryable: true,
      error: { name: "NonRetryableDelayError", message: `The delay function for step "${name}-${count}" ${why}` } };
  } finally {
    clearTimeout(t);
  }
}

// MAX_ERROR_CHARS bounds the error name and message an attempt report carries, so the
// report fits the engine's body limit for _run/attempt (the step result limit plus 64 KiB):
// 8192 characters are at most 48 KiB of JSON. A project decision (docs/workflows.md).
const MAX_ERROR_CHARS = 8192;

function clipError(report) {
  const e = report.error;
  if (!e) return report;
  const clip = (s) => (s.length > MAX_ERROR_CHARS ? s.slice(0, MAX_ERROR_CHARS) + "…" : s);
  return { ...report, error: { name: clip(String(e.name)), message: clip(String(e.message)) } };
}

export function makeError(info) {
  const e = new Error(info?.message ?? "");
  e.name = info?.name ?? "Error";
  return e;
}

// JS_ERROR_TYPES keep their name across a JS RPC boundary, as does workerd's own
// NonRetryableError (cloudflare:workflows); any other error arrives as an Error whose
// message starts with its name.
const JS_ERROR_TYPES = new Set(["Error", "TypeError", "RangeError", "ReferenceError", "SyntaxError", "EvalError", "URIError", "AggregateError", "NonRetryableError"]);

// deliveredError is the engine's error as run() receives it: as the pinned workerd's
// own engine delivers it over JS RPC, an error of another name is an Error whose
// message is "<name>: <message>" (internal/workflows TestMatchesBuiltInEngine).
export function deliveredError(info) {
  const name = info?.name ?? "Error";
  if (JS_ERROR_TYPES.has(name)) return makeError(info);
  return new Error(`${name}: ${info?.message ?? ""}`);
}

function withTimeout(p, ms, logicalMs) {
  if (!ms || ms <= 0) return p;
  let t;
  const timeout = new Promise((_, reject) => {
    t = setTimeout(() => reject(makeError({ name: "WorkflowTimeoutError", message: `Execution timed out after ${logicalMs ?? ms}ms` })), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}
