// gateway.js: the worker behind the `gateway` socket (port 9093, docs/pod-contract.md) of
// a Durable Object shard pod. The routers of other pods (router.js) reach it through an
// `external` service with capnpConnectHost, so its methods are real JS RPC.
//
// Bindings (rendered by internal/render): NS (the namespace hosted by this
// pod, the user's class with localDisk storage), CONFIG (JSON {namespace, shards}),
// POD_NAME ("<statefulset>-<ordinal>", from the downward API; the ordinal is this
// pod's shard).
//
// RPC: invoke({id: "<64 hex>", name?: string}, method, args) -> the object's
//   method(...args), awaited. The object is NS.idFromName(name) when name is given (so
//   ctx.id.name is kept), else NS.idFromString(id). Refuses (Error "... belongs to shard
//   k, this pod is shard s; refusing to serve it") an object this shard does not own,
//   so a misrouted call never creates a second copy. Results must be structured-clone
//   data (router-common.js).
// RPC: open({id, name?}) -> a Session for that object (same checks as invoke), with
//   session.invoke(method, args), session.fetch(request) and
//   session.connect(address, options, upstream) (stub.connect(): returns the byte
//   stream the object's connect() handler writes, upstream is what the caller writes).
//   open() does nothing to
//   the object, so a router may retry a failed open() freely; a call made on an open
//   session travels on the connection open() answered on. While the pod drains,
//   open() refuses with an Error whose .stopping is true (nothing was done).
// HTTP: any request carrying x-workerd-operator-do-id (and optionally
//   x-workerd-operator-do-name) goes to that object's fetch() without those headers;
//   a request without the id header is 400, a misrouted one 421, both with a text body.
//   A 101 with a WebSocket is relayed (relay(), below): how WebSocket upgrades arrive.
// Drain: GET /_workerd-operator/drain (the shard pod's preStop hook) makes open() refuse
//   new sessions, closes every relayed WebSocket with 1012 (service restart) and a
//   reason, and answers once no call is in flight on this pod (at most DRAIN_MS);
//   the refusal lasts until the pod stops, or DRAIN_MS after the last drain request.

import { WorkerEntrypoint, RpcTarget } from "cloudflare:workers";
import { shardFor, assertCrossable } from "./router-common.js";

const ID_HEADER = "x-workerd-operator-do-id";
const NAME_HEADER = "x-workerd-operator-do-name";
const DRAIN_PATH = "/_workerd-operator/drain";
const DRAIN_MS = 60000;
// Calls that completed within QUIET_MS of the end of a drain may have been sessions
// opened just before it; the drain waits that long with nothing in flight.
const QUIET_MS = 250;

// One isolate serves the gateway: these count for the whole pod.
let inflight = 0;
let stoppingUntil = 0;

function stopping() { return Date.now() < stoppingUntil; }

async function tracked(f) {
  inflight++;
  try {
    return await f();
  } finally {
    inflight--;
  }
}

async function drain() {
  stoppingUntil = Date.now() + DRAIN_MS;
  for (const r of relays) r.stop();
  const deadline = Date.now() + DRAIN_MS - 1000;
  let quietSince = inflight === 0 ? Date.now() : 0;
  while (Date.now() < deadline) {
    if (inflight > 0) quietSince = 0;
    else if (!quietSince) quietSince = Date.now();
    else if (Date.now() - quietSince >= QUIET_MS) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return new Response(`drained: ${inflight} calls in flight\n`);
}

// Session is one object's RPC surface for one caller, handed out by open().
class Session extends RpcTarget {
  #gw; #id;
  constructor(gw, id) { super(); this.#gw = gw; this.#id = id; }
  invoke(method, args) { return tracked(() => this.#gw.call(this.#id, method, args)); }
  fetch(request) { return tracked(() => this.#gw.env.NS.get(this.#id).fetch(request)); }
  // connect: stub.connect() of a router on another pod. upstream is what the caller
  // writes; the result is what the object's connect() handler writes.
  connect(address, options, upstream) {
    const sock = this.#gw.env.NS.get(this.#id).connect(address, options);
    upstream.pipeTo(sock.writable).catch(() => {});
    return sock.readable;
  }
}

export default class Gateway extends WorkerEntrypoint {
  self() {
    const m = /-(\d+)$/.exec(String(this.env.POD_NAME ?? ""));
    return m ? Number(m[1]) : -1;
  }

  // resolve returns the DurableObjectId of ref after the ownership check.
  resolve(ref) {
    const c = this.env.CONFIG;
    if (!ref || typeof ref.id !== "string") {
      throw new TypeError(`Durable Object namespace ${c.namespace}: gateway: the object reference needs an id string`);
    }
    const id = ref.name !== undefined && ref.name !== null
      ? this.env.NS.idFromName(String(ref.name))
      : this.env.NS.idFromString(ref.id);
    if (id.toString() !== ref.id) {
      throw new Error(`Durable Object namespace ${c.namespace}: gateway: name ${JSON.stringify(ref.name)} gives id ${id} here, not ${ref.id}; the pods disagree on the namespace's uniqueKey`);
    }
    const want = shardFor(ref.id, c.shards);
    const self = this.self();
    if (want !== self) {
      // "of <shards>": a router that routes by another count (the namespace is being
      // resharded, docs/scaling.md) learns this one and routes again.
      const e = new Error(`Durable Object namespace ${c.namespace}: object ${ref.id} belongs to shard ${want} of ${c.shards}, this pod (${this.env.POD_NAME}) is shard ${self}; refusing to serve it`);
      e.misrouted = true;
      throw e;
    }
    return id;
  }

  // shardCount is the count this shard set serves: a router whose owner is away asks
  // it, since after a reshard to fewer shards that owner never comes back.
  shardCount() {
    return this.env.CONFIG.shards;
  }

  open(ref) {
    if (stopping()) {
      const e = new Error(`Durable Object namespace ${this.env.CONFIG.namespace}: shard pod ${this.env.POD_NAME} is stopping (being replaced); nothing was done, retry on its successor`);
      e.stopping = true;
      throw e;
    }
    return new Session(this, this.resolve(ref));
  }

  invoke(ref, method, args) {
    return tracked(() => this.call(this.resolve(ref), method, args));
  }

  async call(id, method, args) {
    if (typeof method !== "string" || method === "") {
      throw new TypeError(`Durable Object namespace ${this.env.CONFIG.namespace}: gateway: method must be a non-empty string`);
    }
    if (!Array.isArray(args)) args = [];
    const out = await this.env.NS.get(id)[method](...args);
    assertCrossable(out, `the result of ${method}()`);
    return out;
  }

  async fetch(request) {
    if (new URL(request.url).pathname === DRAIN_PATH && !request.headers.has(ID_HEADER)) return drain();
    return tracked(() => this.serveHTTP(request));
  }

  async serveHTTP(request) {
    const id = request.headers.get(ID_HEADER);
    if (!id) {
      return new Response(`gateway: missing ${ID_HEADER} header\n`, { status: 400 });
    }
    const nameH = request.headers.get(NAME_HEADER);
    let oid;
    try {
      oid = this.resolve({ id, name: nameH === null ? undefined : decodeURIComponent(nameH) });
    } catch (e) {
      return new Response(String(e.message) + "\n", { status: e.misrouted ? 421 : 400 });
    }
    const headers = new Headers(request.headers);
    headers.delete(ID_HEADER);
    headers.delete(NAME_HEADER);
    const resp = await this.env.NS.get(oid).fetch(new Request(request, { headers }));
    if (resp.status !== 101 || !resp.webSocket) return resp;
    return relay(resp, this.env.POD_NAME);
  }
}

// WebSockets. The object's socket (hibernatable or not) is held by workerd in this
// process; the gateway relays each message between it and the socket it answers the
// router with, so that a drain can close both ends with 1012 (service restart) and a
// reason instead of leaving them open until the pod is killed (workerd does not close
// WebSockets on SIGTERM). The relay is a plain accepted socket of this stateless
// worker: the object still hibernates while it is open.
const SERVICE_RESTART = 1012;
const relays = new Set();

function relay(resp, pod) {
  const upstream = resp.webSocket;
  const [client, server] = Object.values(new WebSocketPair());
  upstream.accept();
  server.accept();
  const r = { upstream, server };
  // A socket can be closed only from the request that accepted it: the drain (another
  // request) resolves r.stop, and workerd runs the continuation in the context that
  // created the promise, this one (tested: internal/render TestDurableObjectWebSockets).
  new Promise((resolve) => { r.stop = resolve; }).then(() => closeRelay(r, pod));
  relays.add(r);
  pipe(upstream, server, r);
  pipe(server, upstream, r);
  if (stopping()) r.stop();
  const headers = new Headers();
  const proto = resp.headers.get("Sec-WebSocket-Protocol");
  if (proto) headers.set("Sec-WebSocket-Protocol", proto);
  return new Response(null, { status: 101, webSocket: client, headers });
}

// pipe forwards from's messages to to, in order, and its close (code and reason; the
// codes a peer may not send, 1005 and 1006, become 1000 and 1011) or error.
function pipe(from, to, r) {
  from.addEventListener("message", (ev) => {
    try { to.send(ev.data); } catch { /* to is closing */ }
  });
  from.addEventListener("close", (ev) => {
    relays.delete(r);
    const code = ev.code === 1005 ? 1000 : ev.code === 1006 ? 1011 : ev.code;
    try { to.close(code, ev.reason); } catch { /* already closed */ }
  });
  from.addEventListener("error", () => {
    relays.delete(r);
    try { to.close(1011, "the other end of the WebSocket failed"); } catch { /* already closed */ }
  });
}

// closeRelay closes both ends with 1012: the client reconnects (to the successor), the
// object's webSocketClose handler sees the same code.
function closeRelay(r, pod) {
  relays.delete(r);
  const reason = `shard pod ${pod} is being replaced; reconnect`;
  for (const ws of [r.server, r.upstream]) {
    try { ws.close(SERVICE_RESTART, reason); } catch { /* already closed */ }
  }
}
