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

class Channels {
  #sidecar;
  #base;
  constructor(sidecar, namespace, objectId) {
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

  // subscribe(name) → handle. Errors: INVALID_CHANNEL_NAME, CHANNEL_LIMIT (65th channel),
  // SUBSCRIBER_LIMIT (257th subscriber), REGISTRY_RESTARTED, SIDECAR_UNAVAILABLE.
  async subscribe(name) {
    checkName(name);
    return (await this.#call("subscribe", { channel: name })).handle;
  }

  // publish(name, text) → subscribers reached (0 when nobody subscribes). Errors:
  // INVALID_MESSAGE (not a well-formed string), MESSAGE_TOO_LARGE (over 64 KiB of UTF-8),
  // INVALID_CHANNEL_NAME, REGISTRY_RESTARTED, SIDECAR_UNAVAILABLE.
  async publish(name, text) {
    checkName(name);
    if (typeof text !== "string") {
      throw new ChannelError("INVALID_MESSAGE", `message must be a string (UTF-8 text), got ${typeof text}`);
    }
    if (typeof text.isWellFormed === "function" && !text.isWellFormed()) {
      throw new ChannelError("INVALID_MESSAGE", "message is not well-formed text (lone UTF-16 surrogate); it cannot be UTF-8");
    }
    return (await this.#call("publish", { channel: name, message: text })).reached;
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

  // messages(handle, heartbeatMs) → an async iterator of wait outcomes carried by one
  // sidecar response (the stream route): {outcome:"message",message} in order,
  // {outcome:"timeout"} after each heartbeatMs without a message, and finally
  // {outcome:"closed"|"disconnected",reason}, after which it ends. Use it inside the
  // request (or waitUntil) that serves the subscriber. Leaving the loop early keeps the
  // rest of the current batch for the next wait; messages already on their way in later
  // lines are consumed. Errors as wait.
  async *messages(handle, heartbeatMs = 1000) {
    for (;;) {
      const r = await this.wait(handle, 0); // what a batch already holds, or a poll
      if (r.outcome === "timeout") break;
      yield r;
      if (r.outcome !== "message") return;
    }
    const b = batches.get(handle);
    const res = await this.#fetch("stream", { handle, timeoutMs: heartbeatMs, ack: b ? b.seq + b.next : 0 });
    if (!res.ok) await this.#parse("stream", res);
    const lines = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    try {
      for (;;) {
        const { value, done } = await lines.read().catch((e) => ({ done: true, error: e }));
        if (done) {
          throw new ChannelError("REGISTRY_RESTARTED", "channel registry restarted: the sidecar ended the stream; subscribe again");
        }
        text += value;
        let nl;
        while ((nl = text.indexOf("\n")) >= 0) {
          const o = JSON.parse(text.slice(0, nl));
          text = text.slice(nl + 1);
          if (o.error) throw new ChannelError(o.error.code, o.error.message, { limit: o.error.limit, source: o.error.source });
          if (o.outcome !== "messages") {
            yield o;
            if (o.outcome !== "timeout") return;
            continue;
          }
          const kept = { seq: o.seq, messages: o.messages, next: 0, at: Date.now() };
          remember(handle, kept);
          while (kept.next < kept.messages.length) yield { outcome: "message", message: kept.messages[kept.next++] };
        }
      }
    } finally {
      lines.cancel().catch(() => {});
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
    return new Channels(this.#env.sidecar, cfg.namespace || "default", ctx.id.toString());
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
