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
//             shardNames: ["<pod>", ...]} (shardNames for error messages).
//   SHARD_<i> for each shard i: a service binding to shard i's gateway socket (port
//             9093), an `external` service with capnpConnectHost, so JS RPC crosses.
//   POD_NAME  on shard pods of this namespace: the pod name "<statefulset>-<ordinal>";
//             the ordinal is this pod's shard.
//
// The binding: idFromName / idFromString / newUniqueId come from NS. get(id) and
// getByName(name) return a stub for shard s = shardFor(id.toString(), N): stub.fetch()
// and stub.<method>(...args) run in this process (NS.get(id)) when s is this pod's shard,
// else they go to SHARD_<s>'s gateway (gateway.js), which calls its local NS. There is
// no fallback: a shard that is down or not ready makes its objects' calls fail with an
// Error naming the shard, and no other shard serves them (one owner per object).
// Arguments and results must be structured-clone data (router-common.js), in-process too.
// Transient failures are retried with failure.js callWithRetry (retryable classes only,
// never "overloaded"; 3 attempts, fresh stub each time); fetch() with a body is not retried.
//
// Remote fetch(): the request goes to the gateway with headers
// x-workerd-operator-do-id: <id hex> and, when known, x-workerd-operator-do-name:
// <encodeURIComponent(name)>; the gateway removes them before the object sees the request.

import { shardFor, assertCrossable } from "workerd-operator:router-common";
import { callWithRetry, classifyCall } from "workerd-operator:failure";

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
    return (this.cfg.shardNames && this.cfg.shardNames[s]) || `shard ${s}`;
  }

  unavailable(s, err) {
    const e = new Error(
      `${this.label}: shard ${s} (${this.shardName(s)}) is unavailable: ${err && err.message ? err.message : err}. ` +
      "Its objects are served by that shard only; retry when it is ready again");
    e.cause = err;
    e.retryable = false;
    return e;
  }

  // A transport failure to a remote gateway, as opposed to an error the object threw.
  isTransport(err) {
    if (!err || err.remote) return false;
    const m = String(err.message || err).toLowerCase();
    return classifyCall(err) === "connection_lost" || /connect|dns|network|refused|disconnected|broken pipe|peer/.test(m);
  }

  localStub(id) {
    return this.ns.get(id);
  }

  async call(s, id, name, method, args) {
    args.forEach((a, i) => assertCrossable(a, `argument ${i} of ${method}()`));
    let out;
    if (s === this.self) {
      out = await callWithRetry(() => this.localStub(id)[method](...args));
    } else {
      const gw = this.env[`SHARD_${s}`];
      if (!gw) throw this.unavailable(s, new Error("no gateway binding rendered for it"));
      try {
        out = await callWithRetry(() => gw.invoke({ id: id.toString(), name }, method, args));
      } catch (err) {
        if (this.isTransport(err)) throw this.unavailable(s, err);
        throw err;
      }
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
    const gw = this.env[`SHARD_${s}`];
    if (!gw) throw this.unavailable(s, new Error("no gateway binding rendered for it"));
    const headers = new Headers(req.headers);
    headers.set(ID_HEADER, id.toString());
    if (name !== undefined) headers.set(NAME_HEADER, encodeURIComponent(name));
    const out = new Request(req, { headers });
    try {
      if (out.body === null) return await callWithRetry(() => gw.fetch(out.clone()));
      return await gw.fetch(out);
    } catch (err) {
      if (this.isTransport(err)) throw this.unavailable(s, err);
      throw err;
    }
  }
}

function makeStub(r, id, name) {
  const s = shardFor(id.toString(), r.shards);
  const target = {
    id,
    name,
    fetch: (input, init) => r.fetch(s, id, name, input, init),
  };
  return new Proxy(target, {
    get(t, p) {
      if (Object.prototype.hasOwnProperty.call(t, p)) return t[p];
      if (typeof p === "symbol" || p === "then" || p === "toJSON") return undefined;
      return (...args) => r.call(s, id, name, p, args);
    },
  });
}

// The wrapped binding's entrypoint: workerd calls it with the inner bindings.
export default function makeBinding(env) {
  return new Router(env);
}
