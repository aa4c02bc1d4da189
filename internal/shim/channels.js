// channels.js: the durable-channels client for Durable Object code (durable channel
// contract 0.1.0, docs/channels.md).
//
// Given to Durable Object code as a `wrapped` binding (name from
// DurableObjectNamespace.spec.channels.binding, default CHANNELS): this file is the
// internal extension module "workerd-operator:channels"; the binding's innerBindings are
//   sidecar  service binding to the `external` service "sidecar" ($(POD_IP):9092)
//   config   json {"namespace": "<DurableObjectNamespace name>"}
//
// Use, inside a Durable Object class:
//   const ch = this.env.CHANNELS.open(this.ctx);     // throws NOT_DURABLE_OBJECT elsewhere
//   const h = await ch.subscribe("room");             // "<instanceToken>:<readerId>"
//   const n = await ch.publish("room", "text");       // subscribers reached
//   const r = await ch.wait(h, 300);                  // {outcome:"message",message} |
//                                                      // {outcome:"timeout"} |
//                                                      // {outcome:"closed",reason} |
//                                                      // {outcome:"disconnected",reason}
//   for await (const r of ch.messages(h, 1000)) {...} // the same outcomes over one stream
//   await ch.unsubscribe(h); await ch.close("room", "bye"); await ch.subscriberCount("room");
//
// Every failure is a catchable ChannelError (an Error) with a stable `code` (the sidecar's
// codes plus NOT_DURABLE_OBJECT and SIDECAR_UNAVAILABLE), and `limit`/`source` for limits.

const API = "http://sidecar/channels/v1/objects/";

// BATCH is how many queued messages one wait request may fetch.
const BATCH = 256;

// batches: per subscription handle, the messages the last wait request fetched
// ({seq, messages, next}). Module scope, so every open(ctx) of the object in this isolate
// shares them (a handle outlives the request that subscribed).
const batches = new Map();

// A handle nobody waits on for STALE_MS is gone (its lease lapsed long before), so its
// entry is dropped when the map grows, bounding what abandoned subscriptions keep.
const STALE_MS = 20 * 60 * 1000;
function remember(handle, b) {
  batches.delete(handle); // re-insert: the map's order is the order of use
  batches.set(handle, b);
  if (batches.size <= 1024) return;
  for (const [h, x] of batches) {
    if (b.at - x.at < STALE_MS) break;
    batches.delete(h);
  }
}

// keep adds a messages line for handle that no messages() loop takes (it ended before
// taking it, or while the line was on its way) to the handle's batch: the sidecar counts
// it as handed over, so the next wait or messages() answers it from here. Messages the
// batch already holds (same sequence numbers) are not added twice.
function keep(handle, o) {
  const b = batches.get(handle);
  const end = b ? b.seq + b.messages.length : 0;
  if (b && o.seq + o.messages.length <= end) return;
  if (b && o.seq <= end) {
    const fresh = o.messages.slice(end - o.seq);
    remember(handle, { seq: b.seq + b.next, messages: b.messages.slice(b.next).concat(fresh), next: 0, at: Date.now() });
  } else {
    remember(handle, { seq: o.seq, messages: o.messages, next: 0, at: Date.now() });
  }
}

// The sidecar cuts a request body silent for its body timeout (30 s); a streams request
// sends an empty line this often to stay open.
const KEEPALIVE_MS = 10 * 1000;

// A messages() loop whose received lines not yet taken exceed PAUSE_BYTES (the default
// backlog limit) is paused: its handle is stopped until the loop took them, so what is
// published meanwhile queues in the sidecar, whose backlog limit disconnects a loop that
// does not keep up, instead of piling up in the isolate (one streams request reads the
// lines of every loop, so it cannot leave a slow loop's lines unread).
const PAUSE_BYTES = 1 << 20;

// connsOf: per Durable Object instance (its state, this.ctx), the requests its channel
// calls share: {streams, pipeline}. A Durable Object's requests share its I/O, so one
// streams request serves all its subscribers (one read takes the lines of every
// subscriber a publish reached) and one pipeline all its publishes. Keyed by the state,
// not the id, so an instance never uses the connections of one it replaced.
const connsOf = new WeakMap();
function connsFor(ctx) {
  let c = connsOf.get(ctx);
  if (!c) connsOf.set(ctx, (c = { streams: null, pipeline: null }));
  return c;
}

class Streams {
  #sidecar;
  #base;
  #writer;
  #writes = Promise.resolve();
  #consumers = new Map();
  #stopping = new Map(); // handle → {done, resolve}: stop sent, "stopped" not yet read
  #conns;
  #opened;
  #timer;
  #ended = null;
  constructor(sidecar, base, conns) {
    this.#sidecar = sidecar;
    this.#base = base;
    this.#conns = conns;
  }

  static of(sidecar, base, conns) {
    if (!conns.streams) conns.streams = new Streams(sidecar, base, conns);
    return conns.streams;
  }

  // open starts the request once; it throws what prevented that.
  open() {
    if (!this.#opened) this.#opened = this.#start();
    return this.#opened;
  }

  async #start() {
    const { readable, writable } = new IdentityTransformStream();
    this.#writer = writable.getWriter();
    let res;
    try {
      res = await this.#sidecar.fetch(this.#base + "streams", {
        method: "POST",
        headers: { "content-type": "application/x-ndjson" },
        body: readable,
      });
    } catch (e) {
      this.#end();
      throw new ChannelError("SIDECAR_UNAVAILABLE", `the channel registry (sidecar) could not be reached for streams: ${e && e.message ? e.message : e}`);
    }
    if (!res.ok) {
      this.#end();
      await parseAnswer("streams", res);
    }
    const busy = () => this.#consumers.size > 0 || this.#stopping.size > 0;
    this.#timer = setInterval(() => (busy() ? this.#send("") : this.#end()), KEEPALIVE_MS);
    this.#read(res.body.getReader());
  }

  #send(line) {
    const w = this.#writer;
    const data = new TextEncoder().encode(line + "\n");
    this.#writes = this.#writes.then(() => w.write(data)).catch(() => {});
  }

  // add starts streaming handle to a new consumer: {lines, wake}; null when the request
  // ended meanwhile (the caller opens another).
  add(handle, heartbeatMs, ack) {
    if (this.#ended) return null;
    if (this.#consumers.has(handle)) {
      throw new ChannelError("INVALID_ARGUMENT", `subscription ${handle} is already read by another messages() loop of this object`);
    }
    // bytes: of lines; end: the sequence number after the last message received.
    const c = { lines: [], wake: null, bytes: 0, end: ack, heartbeatMs, paused: false, resumed: false };
    this.#consumers.set(handle, c);
    this.#send(JSON.stringify({ handle, timeoutMs: heartbeatMs, ack }));
    return c;
  }

  // remove stops streaming handle for consumer c. The lines c received but did not take,
  // and those still on their way until the sidecar answers "stopped", are kept for the
  // next wait or messages() (the sidecar counts them as handed over).
  remove(handle, c) {
    if (this.#consumers.get(handle) !== c) return;
    this.#consumers.delete(handle);
    for (const o of c.lines) if (o.outcome === "messages") keep(handle, o);
    c.lines = [];
    if (!this.#ended) this.#stop(handle);
  }

  // stopping is a promise settled once no line of handle is on its way any more, or
  // undefined when none is: a wait or loop on handle awaits it first, so it neither
  // misses such a line nor gets its messages twice.
  stopping(handle) {
    const s = this.#stopping.get(handle);
    return s && s.done;
  }

  // next is c's next line, once there is one. A paused handle is started again once its
  // lines were taken and its stop answered, from what c received (no line twice).
  async next(handle, c) {
    for (;;) {
      if (c.lines.length > 0) {
        const o = c.lines.shift();
        c.bytes -= o.bytes;
        return o;
      }
      const stopping = c.paused && this.stopping(handle);
      if (stopping) {
        await stopping;
        continue;
      }
      if (c.paused && this.#consumers.get(handle) === c && !this.#ended) {
        c.paused = false;
        c.resumed = true;
        this.#send(JSON.stringify({ handle, timeoutMs: c.heartbeatMs, ack: c.end }));
      }
      await new Promise((r) => (c.wake = r));
    }
  }

  // pause stops handle's stream while c holds over PAUSE_BYTES of lines not taken.
  #pause(handle, c) {
    if (c.paused || c.bytes <= PAUSE_BYTES || this.#ended) return;
    c.paused = true;
    this.#stop(handle);
  }

  // stop sends a stop for handle; stopping(handle) settles once it is answered.
  #stop(handle) {
    if (this.#stopping.has(handle)) return;
    let resolve;
    const done = new Promise((r) => (resolve = r));
    this.#stopping.set(handle, { done, resolve });
    this.#send(JSON.stringify({ handle, stop: true }));
  }

  async #read(reader) {
    const dec = new TextDecoder();
    let text = "";
    let why = "the sidecar ended the streams request";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += dec.decode(value, { stream: true });
        let nl;
        while ((nl = text.indexOf("\n")) >= 0) {
          this.#route(JSON.parse(text.slice(0, nl)), nl);
          text = text.slice(nl + 1);
        }
      }
    } catch (e) {
      why = `the streams request failed: ${e && e.message ? e.message : e}`;
    }
    this.#end(new ChannelError("REGISTRY_RESTARTED", `channel registry restarted: ${why}; subscribe again`));
  }

  #route(o, bytes) {
    if (o.stopped) {
      const s = this.#stopping.get(o.handle);
      this.#stopping.delete(o.handle);
      if (s) s.resolve();
      return;
    }
    const c = this.#consumers.get(o.handle);
    if (!c) {
      if (o.outcome === "messages") keep(o.handle, o);
      return;
    }
    if (c.resumed && o.outcome === "timeout") return; // the restarted stream's first line
    c.resumed = false;
    if (o.outcome === "messages") c.end = o.seq + o.messages.length;
    o.bytes = bytes;
    c.bytes += bytes;
    c.lines.push(o);
    this.#pause(o.handle, c);
    if (c.wake) {
      const w = c.wake;
      c.wake = null;
      w();
    }
  }

  // end makes this request unusable: the next messages() opens another; each consumer
  // gets err (a stream that ends without closed/disconnected ends with an error).
  #end(err) {
    if (this.#conns.streams === this) this.#conns.streams = null;
    clearInterval(this.#timer);
    this.#ended = err || new ChannelError("REGISTRY_RESTARTED", "channel registry restarted; subscribe again");
    try {
      this.#writer.close().catch(() => {});
    } catch {}
    for (const c of this.#consumers.values()) {
      c.lines.push({ bytes: 0, error: { code: this.#ended.code, message: this.#ended.message.replace(/^[A-Z_]+: /, "") } });
      if (c.wake) c.wake();
    }
    this.#consumers.clear();
    for (const s of this.#stopping.values()) s.resolve();
    this.#stopping.clear();
  }
}

// Pipeline is the pipeline request an object's publishes go on: one line each instead of
// one request each, answered in order.
class Pipeline {
  #conns;
  #writer;
  #pending = [];
  #timer;
  #used = false;
  #ended = null;
  constructor(sidecar, base, conns) {
    this.#conns = conns;
    const { readable, writable } = new IdentityTransformStream();
    this.#writer = writable.getWriter();
    const res = sidecar.fetch(base + "pipeline", {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: readable,
    });
    this.#read(res);
    // A pipeline silent for the sidecar's body timeout (30 s) is cut: one with nothing to
    // send for KEEPALIVE_MS ends instead, and the next publish opens another.
    this.#timer = setInterval(() => {
      if (!this.#used && this.#pending.length === 0) this.#end(null);
      this.#used = false;
    }, KEEPALIVE_MS);
  }

  static of(sidecar, base, conns) {
    if (!conns.pipeline) conns.pipeline = new Pipeline(sidecar, base, conns);
    return conns.pipeline;
  }

  // publish sends one line and resolves with its answer.
  publish(name, text) {
    this.#used = true;
    const line = new TextEncoder().encode(JSON.stringify({ channel: name, message: text }) + "\n");
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject });
      this.#writer.write(line).catch(() => {});
    });
  }

  async #read(response) {
    let why;
    try {
      const res = await response;
      if (!res.ok) {
        why = `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
      } else {
        why = await this.#answers(res.body.getReader());
      }
    } catch (e) {
      why = e && e.message ? e.message : String(e);
    }
    const err = new ChannelError("SIDECAR_UNAVAILABLE", `the channel registry (sidecar) connection was lost during publish (${why}); the message may or may not have been published`);
    err.network = true;
    this.#end(err);
  }

  // answers settles the pending publishes with the answer lines; it returns why they ended.
  async #answers(reader) {
    const dec = new TextDecoder();
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "the sidecar ended the pipeline";
      text += dec.decode(value, { stream: true });
      let nl;
      while ((nl = text.indexOf("\n")) >= 0) {
        const o = JSON.parse(text.slice(0, nl));
        text = text.slice(nl + 1);
        const p = this.#pending.shift();
        if (!p) continue;
        if (o.error) p.reject(new ChannelError(o.error.code, o.error.message, { limit: o.error.limit, source: o.error.source }));
        else p.resolve(o.reached);
      }
    }
  }

  #end(err) {
    if (this.#conns.pipeline === this) this.#conns.pipeline = null;
    clearInterval(this.#timer);
    try {
      this.#writer.close().catch(() => {});
    } catch {}
    if (this.#ended) return;
    this.#ended = err;
    for (const p of this.#pending.splice(0)) p.reject(err);
  }
}

class ChannelError extends Error {
  constructor(code, message, extra) {
    super(`${code}: ${message}`);
    this.name = "ChannelError";
    this.code = code;
    if (extra && extra.limit !== undefined) this.limit = extra.limit;
    if (extra && extra.source !== undefined) this.source = extra.source;
    if (extra && extra.status !== undefined) this.status = extra.status;
  }
}

function notDurableObject(what) {
  return new ChannelError(
    "NOT_DURABLE_OBJECT",
    `durable channels are only available in Durable Object code: ${what} ` +
      "(call env.<binding>.open(this.ctx) inside a Durable Object class)",
  );
}

function isDurableObjectState(ctx) {
  return (
    ctx !== null &&
    typeof ctx === "object" &&
    ctx.id !== null &&
    typeof ctx.id === "object" &&
    typeof ctx.id.toString === "function" &&
    typeof ctx.id.equals === "function" &&
    ctx.storage !== null &&
    typeof ctx.storage === "object" &&
    typeof ctx.storage.get === "function"
  );
}

function checkName(name) {
  if (typeof name !== "string") {
    throw new ChannelError("INVALID_CHANNEL_NAME", `channel name must be a string, got ${typeof name}`);
  }
}

// MAX_MESSAGE_BYTES is the contract's message size ceiling (a namespace may only lower
// it; the sidecar enforces the value in force). A message over it is refused here: on
// the object's pipeline, its line could exceed the sidecar's request body limit, which
// ends the pipeline and fails the publishes sent with it.
const MAX_MESSAGE_BYTES = 65536;
function checkSize(text) {
  if (text.length * 3 <= MAX_MESSAGE_BYTES) return; // UTF-8 takes at most 3 bytes per UTF-16 unit
  const n = new TextEncoder().encode(text).length;
  if (n > MAX_MESSAGE_BYTES) {
    throw new ChannelError("MESSAGE_TOO_LARGE", `message is ${n} bytes of UTF-8, over the limit maxMessageBytes = ${MAX_MESSAGE_BYTES} (64 KiB, the durable channel contract's ceiling)`, {
      limit: MAX_MESSAGE_BYTES,
      source: "durable channel contract 0.1.0 (docs/channels.md)",
    });
  }
}

// parseAnswer is the JSON answer of sidecar route op; an error answer (or one that is not
// JSON) throws its ChannelError.
async function parseAnswer(op, res) {
  let data;
  const text = await res.text();
  try {
    data = JSON.parse(text);
  } catch {
    throw new ChannelError("SIDECAR_UNAVAILABLE", `the sidecar answered ${op} with HTTP ${res.status} and no JSON: ${text.slice(0, 200)}`);
  }
  if (!res.ok || data.error) {
    const e = data.error || {};
    throw new ChannelError(e.code || "SIDECAR_UNAVAILABLE", e.message || `HTTP ${res.status}`, {
      limit: e.limit,
      source: e.source,
      status: res.status,
    });
  }
  return data;
}

class Channels {
  #sidecar;
  #base;
  #conns;
  constructor(sidecar, namespace, ctx) {
    const objectId = ctx.id.toString();
    this.#conns = connsFor(ctx);
    this.#sidecar = sidecar;
    this.#base = API + encodeURIComponent(namespace) + "/" + encodeURIComponent(objectId) + "/";
  }

  async #call(op, body, method = "POST", query = "") {
    return this.#parse(op, await this.#fetch(op, body, method, query));
  }

  async #fetch(op, body, method = "POST", query = "") {
    try {
      return await this.#sidecar.fetch(this.#base + op + query, {
        method,
        headers: method === "POST" ? { "content-type": "application/json" } : {},
        body: method === "POST" ? JSON.stringify(body) : undefined,
      });
    } catch (e) {
      const err = new ChannelError(
        "SIDECAR_UNAVAILABLE",
        `the channel registry (sidecar) could not be reached for ${op}: ${e && e.message ? e.message : e}`,
      );
      err.network = true;
      throw err;
    }
  }

  async #parse(op, res) {
    return parseAnswer(op, res);
  }

  // subscribe(name) → handle. Errors: INVALID_CHANNEL_NAME, CHANNEL_LIMIT (65th channel),
  // SUBSCRIBER_LIMIT (257th subscriber), REGISTRY_RESTARTED, SIDECAR_UNAVAILABLE.
  async subscribe(name) {
    checkName(name);
    return (await this.#call("subscribe", { channel: name })).handle;
  }

  // publish(name, text) → subscribers reached (0 when nobody subscribes), sent on the
  // object's pipeline request and applied in call order. Errors: INVALID_MESSAGE (not a
  // well-formed string), MESSAGE_TOO_LARGE (over 64 KiB of UTF-8), INVALID_CHANNEL_NAME,
  // REGISTRY_RESTARTED, SIDECAR_UNAVAILABLE (also when the connection is lost before the
  // answer: the message may or may not have been published).
  async publish(name, text) {
    checkName(name);
    if (typeof text !== "string") {
      throw new ChannelError("INVALID_MESSAGE", `message must be a string (UTF-8 text), got ${typeof text}`);
    }
    if (typeof text.isWellFormed === "function" && !text.isWellFormed()) {
      throw new ChannelError("INVALID_MESSAGE", "message is not well-formed text (lone UTF-16 surrogate); it cannot be UTF-8");
    }
    checkSize(text);
    return Pipeline.of(this.#sidecar, this.#base, this.#conns).publish(name, text);
  }

  // wait(handle, timeoutMs) → {outcome, message?, reason?}. timeoutMs 0 polls. A timed-out
  // wait consumes nothing. Errors: UNKNOWN_HANDLE, FOREIGN_HANDLE, SUBSCRIPTION_GONE,
  // REGISTRY_RESTARTED (the sidecar restarted or its connection was lost mid-wait),
  // INVALID_ARGUMENT.
  //
  // One request fetches up to BATCH queued messages (batched wait); the following waits
  // answer from them without a request, and the next request acknowledges the ones
  // answered, so the sidecar drops them only then (a lost answer is answered again).
  async wait(handle, timeoutMs) {
    if (typeof handle !== "string") {
      throw new ChannelError("UNKNOWN_HANDLE", `subscription handle must be a string, got ${typeof handle}`);
    }
    if (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
      throw new ChannelError("INVALID_ARGUMENT", `timeoutMs must be a finite number >= 0 (milliseconds), got ${String(timeoutMs)}`);
    }
    const stopping = this.#conns.streams && this.#conns.streams.stopping(handle);
    if (stopping) await stopping; // a line of a loop that left may still be on its way
    const b = batches.get(handle);
    if (b && b.next < b.messages.length) {
      return { outcome: "message", message: b.messages[b.next++] };
    }
    let r;
    try {
      r = await this.#waitBatch(handle, timeoutMs, b);
    } catch (e) {
      batches.delete(handle);
      throw e;
    }
    if (r.outcome !== "messages") {
      if (r.outcome !== "timeout") batches.delete(handle);
      return r;
    }
    remember(handle, { seq: r.seq, messages: r.messages, next: 1, at: Date.now() });
    return { outcome: "message", message: r.messages[0] };
  }

  async #waitBatch(handle, timeoutMs, b) {
    const body = { handle, timeoutMs, max: BATCH, ack: b ? b.seq + b.next : 0 };
    try {
      return await this.#call("wait", body);
    } catch (e) {
      if (!e.network) throw e;
      // The connection to the registry ended mid-wait: the sidecar stopped. Ask once more
      // (a restarted sidecar answers REGISTRY_RESTARTED for this handle); if it is still
      // down, the registry and this subscription are gone all the same.
      await new Promise((r) => setTimeout(r, 50));
      try {
        return await this.#call("wait", { ...body, timeoutMs: 0 });
      } catch (e2) {
        if (!e2.network) throw e2;
        throw new ChannelError(
          "REGISTRY_RESTARTED",
          `channel registry restarted: the sidecar connection was lost during wait (${e.message}) and it is not back; the subscription is gone, subscribe again`,
        );
      }
    }
  }

  // messages(handle, heartbeatMs) → an async iterator of wait outcomes carried by the
  // object's one streams request (shared by its loops): {outcome:"message",message} in
  // order, {outcome:"timeout"} after each heartbeatMs without a message, and finally
  // {outcome:"closed"|"disconnected",reason}, after which it ends. Use it inside the
  // request (or waitUntil) that serves the subscriber. Leaving the loop early keeps what
  // the sidecar already sent for the next wait. One loop per handle at a time
  // (INVALID_ARGUMENT otherwise). Errors as wait.
  async *messages(handle, heartbeatMs = 1000) {
    for (;;) {
      const r = await this.wait(handle, 0); // what a batch already holds, or a poll
      if (r.outcome === "timeout") break;
      yield r;
      if (r.outcome !== "message") return;
    }
    const b = batches.get(handle);
    let s, c;
    for (let i = 0; !c; i++) {
      if (i === 3) throw new ChannelError("REGISTRY_RESTARTED", "channel registry restarted: the streams request kept ending; subscribe again");
      s = Streams.of(this.#sidecar, this.#base, this.#conns);
      await s.open();
      c = s.add(handle, heartbeatMs, b ? b.seq + b.next : 0);
    }
    try {
      for (;;) {
        const o = await s.next(handle, c);
        if (o.error) throw new ChannelError(o.error.code, o.error.message, { limit: o.error.limit, source: o.error.source });
        if (o.outcome !== "messages") {
          yield o.outcome === "timeout" ? { outcome: o.outcome } : { outcome: o.outcome, reason: o.reason };
          if (o.outcome !== "timeout") return;
          continue;
        }
        const kept = { seq: o.seq, messages: o.messages, next: 0, at: Date.now() };
        remember(handle, kept);
        while (kept.next < kept.messages.length) yield { outcome: "message", message: kept.messages[kept.next++] };
      }
    } finally {
      s.remove(handle, c);
    }
  }

  // unsubscribe(handle) → true, or false when it was already gone. Errors: UNKNOWN_HANDLE,
  // FOREIGN_HANDLE, REGISTRY_RESTARTED.
  async unsubscribe(handle) {
    if (typeof handle !== "string") {
      throw new ChannelError("UNKNOWN_HANDLE", `subscription handle must be a string, got ${typeof handle}`);
    }
    batches.delete(handle);
    return (await this.#call("unsubscribe", { handle })).unsubscribed;
  }

  // close(name, reason) → subscribers notified; they drain, then see {outcome:"closed",reason}.
  async close(name, reason = "") {
    checkName(name);
    if (typeof reason !== "string") {
      throw new ChannelError("INVALID_ARGUMENT", `close reason must be a string, got ${typeof reason}`);
    }
    return (await this.#call("close", { channel: name, reason })).notified;
  }

  // subscriberCount(name) → live subscribers (read from the registry, nothing is sent).
  async subscriberCount(name) {
    checkName(name);
    return (await this.#call("subscribers", null, "GET", "?channel=" + encodeURIComponent(name))).subscribers;
  }
}

class ChannelsBinding {
  #env;
  constructor(env) {
    this.#env = env;
  }
  // open(ctx) → Channels for the Durable Object whose state is ctx (this.ctx / state).
  open(ctx) {
    if (!isDurableObjectState(ctx)) {
      throw notDurableObject("open() needs the DurableObjectState (this.ctx), got " + (ctx === null ? "null" : typeof ctx));
    }
    const cfg = this.#env.config || {};
    return new Channels(this.#env.sidecar, cfg.namespace || "default", ctx);
  }
  get ChannelError() {
    return ChannelError;
  }
}
for (const m of ["subscribe", "publish", "wait", "unsubscribe", "close", "subscriberCount"]) {
  ChannelsBinding.prototype[m] = function () {
    return Promise.reject(notDurableObject(`${m}() was called on the binding itself`));
  };
}

export default function makeBinding(env) {
  return new ChannelsBinding(env);
}
export { ChannelError };
