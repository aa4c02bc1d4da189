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
// HTTP: any request carrying x-workerd-operator-do-id (and optionally
//   x-workerd-operator-do-name) goes to that object's fetch() without those headers;
//   a request without the id header is 400, a misrouted one 421, both with a text body.

import { WorkerEntrypoint } from "cloudflare:workers";
import { shardFor, assertCrossable } from "./router-common.js";

const ID_HEADER = "x-workerd-operator-do-id";
const NAME_HEADER = "x-workerd-operator-do-name";

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
      const e = new Error(`Durable Object namespace ${c.namespace}: object ${ref.id} belongs to shard ${want}, this pod (${this.env.POD_NAME}) is shard ${self}; refusing to serve it`);
      e.misrouted = true;
      throw e;
    }
    return id;
  }

  async invoke(ref, method, args) {
    if (typeof method !== "string" || method === "") {
      throw new TypeError(`Durable Object namespace ${this.env.CONFIG.namespace}: gateway: method must be a non-empty string`);
    }
    if (!Array.isArray(args)) args = [];
    const stub = this.env.NS.get(this.resolve(ref));
    const out = await stub[method](...args);
    assertCrossable(out, `the result of ${method}()`);
    return out;
  }

  async fetch(request) {
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
    return this.env.NS.get(oid).fetch(new Request(request, { headers }));
  }
}
