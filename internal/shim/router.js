// router.js: the Durable Object namespace binding every pod of the fleet gets (Worker
// pods and shard pods), as a workerd `wrapped` binding (extension module
// "workerd-operator:router", entrypoint default). docs/durable-objects.md.
//
// Inner bindings (rendered by internal/render):
//   NS        a real durableObjectNamespace binding with the namespace's uniqueKey. On a
//             shard pod of this namespace it is the hosted class; elsewhere it is a class
//             that hosts nothing and only mints ids (ids agree everywhere: they derive
//             from the uniqueKey).
//   CONFIG    JSON {namespace: "<ns>/<name>", shards: N, hosted: bool,
//             shardSet: "<statefulset>"} (shard i is pod "<shardSet>-<i>").
//   SHARD_<i> for every shard the namespace can have (64): a service binding to shard
//             i's gateway socket (port 9093), an `external` service with
//             capnpConnectHost, so JS RPC crosses.
//   POD_NAME  on shard pods of this namespace: the pod name "<statefulset>-<ordinal>";
//             the ordinal is this pod's shard.
//
// The binding: idFromName / idFromString / newUniqueId come from NS. get(id) and
// getByName(name) return a stub for shard s = shardFor(id.toString(), N): stub.fetch()
// and stub.<method>(...args) run in this process (NS.get(id)) when s is this pod's shard,
// else they go to SHARD_<s>'s gateway (gateway.js), which calls its local NS. No other
// shard serves them (one owner per object). Arguments and results must be
// structured-clone data (router-common.js), in-process too.
//
// Resharding (docs/scaling.md): N is where routing starts. A gateway serving another
// count refuses a call with "belongs to shard s of M"; the router then routes by M
// from now on and opens again (nothing reached the object). While an owner is away the
// router asks shard 0 which count it serves, since after a reshard to fewer shards
// that owner never comes back.
//
// Remote calls: open({id, name}) on the gateway returns a session, then
// session.invoke(method, args) or session.fetch(request) runs on the object. Retry rule
// (docs/durable-objects.md "Rollouts"): a call is retried only when it provably did not
// reach the object. open() does nothing to the object, so while it fails because the
// owner is away (connection refused or lost, name not resolving, gateway draining) it
// is retried with backoff for up to OWNER_WAIT_MS (60 s, CONFIG.ownerWaitMs), then an
// Error "shard s (<pod>) is unavailable ..." with retryable = true. A connection lost
// after open() answered may have reached the object: thrown at once, retryable = false.
// Errors the owner's runtime raises with a retryable class (failure.js: superseded
// isolate, storage reset, ...) are retried as in-process calls are: callWithRetry's rule
// (3 attempts, never "overloaded"); fetch() with a body is not replayed. A request with
// Upgrade: websocket goes as HTTP to the gateway after open() (JS RPC cannot carry a
// WebSocket); stub.connect() goes as JS RPC byte streams (session.connect). A gateway from
// before open() (not yet rolled during an operator upgrade) is called the old way:
// invoke(ref, method, args), fetch() with the x-workerd-operator-do-id/-name headers.

import { MAX_SHARDS, shardFor, assertCrossable } from "workerd-operator:router-common";
import { backoff, callWithRetry, classifyCall, isRetryable } from "workerd-operator:failure";

// How long a call waits for an owner that is away (being replaced, starting).
export const OWNER_WAIT_MS = 120000;

export const ID_HEADER = "x-workerd-operator-do-id";
export const NAME_HEADER = "x-workerd-operator-do-name";

class Router {
  constructor(env) {
    this.env = env;
    this.ns = env.NS;
    const c = env.CONFIG || {};
    this.cfg = c;
    this.label = `Durable Object namespace ${c.namespace}`;
    this.shards = c.shards;
    // How long a call waits for its shard's owner while it is away (CONFIG.ownerWaitMs).
    this.waitMs = Number.isFinite(c.ownerWaitMs) ? c.ownerWaitMs : OWNER_WAIT_MS;
    this.self = -1;
    if (c.hosted && typeof env.POD_NAME === "string") {
      const m = /-(\d+)$/.exec(env.POD_NAME);
      if (m) this.self = Number(m[1]);
    }
  }

  idFromName(name) { return this.ns.idFromName(name); }
  idFromString(s) { return this.ns.idFromString(s); }
  newUniqueId(opts) {
    if (opts && opts.jurisdiction) {
      throw new TypeError(`${this.label}: jurisdictions are not supported by workerd-operator`);
    }
    return this.ns.newUniqueId();
  }
  jurisdiction() {
    throw new TypeError(`${this.label}: jurisdictions are not supported by workerd-operator`);
  }

  get(id) {
    if (!id || typeof id.toString !== "function" || typeof id.equals !== "function") {
      throw new TypeError(`${this.label}: get() needs a DurableObjectId from idFromName, idFromString or newUniqueId`);
    }
    return makeStub(this, id, id.name);
  }

  getByName(name) {
    return makeStub(this, this.ns.idFromName(name), String(name));
  }

  shardName(s) {
    return this.cfg.shardSet ? `${this.cfg.shardSet}-${s}` : `shard ${s}`;
  }

  // owner is the shard of id under the count routed by now.
  owner(id) {
    return shardFor(id.toString(), this.shards);
  }

  // adopt routes by n from now on: the count a gateway serves. False when n is the
  // count already routed by (or not a count).
  adopt(n) {
    if (!Number.isInteger(n) || n < 1 || n > MAX_SHARDS || n === this.shards) return false;
    this.shards = n;
    return true;
  }

  // probe asks shard 0's gateway which count it serves while shard s is away, and
  // adopts it; true when the route changed.
  async probe(s) {
    if (s === 0 || !this.env.SHARD_0) return false;
    try {
      return this.adopt(await this.env.SHARD_0.shardCount());
    } catch {
      return false;
    }
  }

  // unavailable: shard s's owner did not take the call within the wait: it is being
  // replaced, or down. Nothing reached the object; retrying later is safe.
  unavailable(s, err, waitedMs) {
    const e = new Error(
      `${this.label}: shard ${s} (${this.shardName(s)}) is unavailable: ${message(err)}` +
      (waitedMs > 0 ? ` (waited ${Math.round(waitedMs / 1000)} s for it; its pod is being replaced or is not ready)` : "") +
      ". Its objects are served by that shard only and the call did not reach the object: retry when it is ready again");
    e.cause = err;
    e.retryable = true;
    e.failureClass = classifyCall(err);
    return e;
  }

  // lost: the connection to shard s broke after the call was sent: the object may or
  // may not have run it, so it is not retried (retryable = false).
  lost(s, err) {
    const e = new Error(
      `${this.label}: the connection to shard ${s} (${this.shardName(s)}) was lost while the call was in flight: ${message(err)}. ` +
      "The object may or may not have run it, so it was not retried; retry yourself only if the method is idempotent");
    e.cause = err;
    e.retryable = false;
    e.failureClass = classifyCall(err);
    return e;
  }

  // ownerAway: a failed open() means the owner is away (being replaced, starting, or
  // down), not that the call is wrong: transport failures (nothing came back from a
  // gateway: connection refused or lost, name not resolving), a draining gateway, or a
  // retryable class raised by the gateway's runtime. open() does nothing to the object,
  // so all of these may be retried.
  ownerAway(err) {
    if (!err || !err.remote) return true;
    if (err.stopping === true || /is stopping \(being replaced\)/.test(message(err))) return true;
    return isRetryable(classifyCall(err));
  }

  // session opens a session for ref on its owner's gateway, waiting up to waitMs
  // (backoff 100 ms doubling to 2 s) while the owner is away; then the unavailable
  // Error. It routes again when a gateway or the probe tells a new count.
  async session(id, ref) {
    const start = Date.now();
    let reroutes = 0;
    for (let n = 1; ; n++) {
      // The count this attempt routes by: another call may adopt a new one meanwhile.
      const by = this.shards;
      const s = this.owner(id);
      const gw = this.env[`SHARD_${s}`];
      if (!gw) throw this.unavailable(s, new Error("no gateway binding rendered for it"), 0);
      try {
        return { s, gw, session: await gw.open(ref) };
      } catch (err) {
        if (err && err.remote && /does not implement the method "open"/.test(message(err))) return { s, gw, session: legacySession(gw, ref) };
        const served = err && err.remote ? misroutedCount(err) : 0;
        if (served > 0 && served !== by && reroutes < MAX_SHARDS) {
          this.adopt(served);
          reroutes++;
          continue;
        }
        if (!this.ownerAway(err)) throw err;
        if (reroutes < MAX_SHARDS && (this.shards !== by || (n >= 2 && await this.probe(s)))) {
          reroutes++;
          continue;
        }
        const ms = backoff(n, 100, 2000);
        if (Date.now() - start + ms > this.waitMs) throw this.unavailable(s, err, Date.now() - start);
        await new Promise((resolve) => setTimeout(resolve, ms));
      }
    }
  }

  // remote runs use(session) on shard s's owner. A transport failure after open()
  // answered is thrown as lost (never retried); an error raised by the owner's runtime
  // with a retryable class is retried on a fresh session, at most `attempts` calls, as
  // callWithRetry does in-process.
  async remote(id, name, use, attempts) {
    const ref = { id: id.toString(), name };
    for (let n = 1; ; n++) {
      const { s, session } = await this.session(id, ref);
      try {
        return await use(session);
      } catch (err) {
        if (!err || !err.remote) throw this.lost(s, err);
        if (n >= attempts || !isRetryable(classifyCall(err))) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, backoff(n, 100, 10000)));
    }
  }

  localStub(id) {
    return this.ns.get(id);
  }

  // upgrade carries a WebSocket upgrade to shard s. JS RPC cannot carry a WebSocket
  // (workerd: DataCloneError), so it goes as HTTP to the gateway (the id headers), which
  // answers 101 with the object's socket. open() first: it waits while the owner is away
  // and refuses a misrouted id, as for any other call; it does nothing to the object.
  async upgrade(id, name, req) {
    const ref = { id: id.toString(), name };
    const { s, gw, session } = await this.session(id, ref);
    if (typeof session[Symbol.dispose] === "function") session[Symbol.dispose]();
    const headers = new Headers(req.headers);
    headers.set(ID_HEADER, ref.id);
    if (name !== undefined) headers.set(NAME_HEADER, encodeURIComponent(name));
    try {
      return await gw.fetch(new Request(req, { headers }));
    } catch (err) {
      throw this.lost(s, err);
    }
  }

  // connect is stub.connect(address, options): a TCP-like socket to the object's
  // connect() handler. In-process it is workerd's own. To another shard the bytes go as
  // JS RPC streams: session.connect() takes the stream the caller writes and returns the
  // stream the object writes (byte streams cross workerd processes; a Socket does not).
  // The returned object has readable, writable, opened, closed and close(); startTls()
  // is not offered across shards.
  connect(s, id, name, address, options) {
    if (s === this.self) return this.localStub(id).connect(address, options);
    const up = new IdentityTransformStream();
    const down = new IdentityTransformStream();
    const opened = this.remote(id, name, (session) => session.connect(address, options ?? {}, up.readable), 1)
      .then((readable) => {
        const closed = readable.pipeTo(down.writable);
        return { closed };
      });
    const closed = opened.then((o) => o.closed);
    const openedInfo = opened.then(() => ({}));
    // The caller sees a failure through these promises and the streams; unawaited,
    // it is not an unhandled rejection.
    opened.catch((err) => down.writable.abort(err).catch(() => {}));
    closed.catch(() => {});
    openedInfo.catch(() => {});
    return {
      readable: down.readable,
      writable: up.writable,
      opened: openedInfo,
      closed,
      close: async () => {
        await Promise.allSettled([up.writable.close(), down.readable.cancel()]);
      },
    };
  }

  async call(s, id, name, method, args) {
    args.forEach((a, i) => assertCrossable(a, `argument ${i} of ${method}()`));
    let out;
    if (s === this.self) {
      out = await callWithRetry(() => this.localStub(id)[method](...args));
    } else {
      out = await this.remote(id, name, async (session) => {
        try {
          return await session.invoke(method, args);
        } finally {
          if (typeof session[Symbol.dispose] === "function") session[Symbol.dispose]();
        }
      }, 3);
    }
    assertCrossable(out, `the result of ${method}()`);
    return out;
  }

  async fetch(s, id, name, input, init) {
    const req = new Request(input, init);
    if (s === this.self) {
      if (req.body === null) return callWithRetry(() => this.localStub(id).fetch(req.clone()));
      return this.localStub(id).fetch(req);
    }
    if (isWebSocketUpgrade(req)) return this.upgrade(id, name, req);
    // A body can be sent once: such a request is not retried after open() answered.
    const replay = req.body === null;
    return this.remote(id, name, (session) => session.fetch(replay ? req.clone() : req), replay ? 3 : 1);
  }
}

// isWebSocketUpgrade: a request asking for a WebSocket (Upgrade: websocket).
function isWebSocketUpgrade(req) {
  return /^websocket$/i.test(req.headers.get("Upgrade") ?? "");
}

// legacySession speaks to a gateway from before open() (a shard pod not yet rolled
// while the operator is upgraded): invoke(ref, ...) and fetch() with the id headers.
function legacySession(gw, ref) {
  return {
    invoke: (method, args) => gw.invoke(ref, method, args),
    fetch: (req) => {
      const headers = new Headers(req.headers);
      headers.set(ID_HEADER, ref.id);
      if (ref.name !== undefined) headers.set(NAME_HEADER, encodeURIComponent(ref.name));
      return gw.fetch(new Request(req, { headers }));
    },
  };
}

// misroutedCount is the count a gateway that refused a misrouted call serves (0: the
// error is not that refusal).
function misroutedCount(err) {
  const m = /belongs to shard \d+ of (\d+)/.exec(message(err));
  return m ? Number(m[1]) : 0;
}

function message(err) {
  return err && err.message ? err.message : String(err);
}

function makeStub(r, id, name) {
  // The owner is looked up at each call: the count routed by may change (resharding).
  const target = {
    id,
    name,
    fetch: (input, init) => r.fetch(r.owner(id), id, name, input, init),
    connect: (address, options) => r.connect(r.owner(id), id, name, address, options),
  };
  return new Proxy(target, {
    get(t, p) {
      if (Object.prototype.hasOwnProperty.call(t, p)) return t[p];
      if (typeof p === "symbol" || p === "then" || p === "toJSON") return undefined;
      return (...args) => r.call(r.owner(id), id, name, p, args);
    },
  });
}

// The wrapped binding's entrypoint: workerd calls it with the inner bindings.
export default function makeBinding(env) {
  return new Router(env);
}
