// env.<DISPATCHER> of a dispatchNamespace binding (Workers for Platforms): get(name)
// returns a fetcher for the user Worker `name` of the dispatch namespace. The pod's
// sidecar (inner binding `fetcher`, an alias that names the namespace) says where the
// Worker runs: a Dedicated one in its own pods, to which the sidecar forwards the call;
// a Shared one as an isolate of this process, loaded with workerd's workerLoader (inner
// binding `loader`) from the code the sidecar gives, its fetch() and connect() through
// inner binding `internet`. When the namespace has no such Worker, fetch() throws
// "Worker not found", as on Cloudflare
// (https://developers.cloudflare.com/cloudflare-for-platforms/workers-for-platforms/configuration/dynamic-dispatch/).
const SCRIPT = "X-Workerd-Operator-Dispatch-Script";
const PROTO = "X-Workerd-Operator-Dispatch-Proto";
const ERROR = "X-Workerd-Operator-Dispatch-Error";
const RESOLVE = "X-Workerd-Operator-Dispatch-Resolve";
// The operator's own headers: the dispatch Worker may not set any (the config adds the
// dispatch namespace's).
const INTERNAL = "x-workerd-operator-";
// How long this isolate trusts what it learnt of a user Worker before asking the
// sidecar again (with If-None-Match: an unchanged Worker costs a 304).
const TTL_MS = 1000;
const MAX_PLACEMENTS = 4096;

function bytes(base64) {
  const s = atob(base64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out.buffer;
}

// loaderCode turns the manager's code (render.LoaderCode) into workerLoader's WorkerCode.
function loaderCode(c, internet) {
  const modules = {};
  for (const m of c.modules) {
    if (m.type === "data" || m.type === "wasm") modules[m.name] = { [m.type]: bytes(m.content) };
    else if (m.type === "json") modules[m.name] = { json: JSON.parse(m.content) };
    else modules[m.name] = { [m.type]: m.content };
  }
  return {
    compatibilityDate: c.compatibilityDate,
    compatibilityFlags: c.compatibilityFlags ?? [],
    mainModule: c.mainModule,
    modules,
    env: c.env ?? {},
    globalOutbound: internet,
  };
}

// DispatchNamespace is the binding: Cloudflare's get() is all the dispatch Worker sees,
// and the rest is private, so its code does not reach the sidecar's questions by
// accident. The module runs in the dispatch Worker's isolate, so that Worker is trusted
// with its user Workers' code and env (docs/dispatch.md), as the platform's code is.
class DispatchNamespace {
  #env;
  // name → { shared, etag, until }: plain values only, since a promise of another
  // request's I/O may not be awaited here.
  #placements = new Map();
  // The isolates of Shared user Workers this process has loaded, by loader key (name and
  // code ID: an edit loads another): workerd keeps each, so their number is bounded by
  // the binding's maxSharedWorkers (config.maxShared), for which the pod's memory is
  // sized.
  #loaded = new Set();
  constructor(env) {
    this.#env = env;
  }
  get(name, args, options) {
    if (typeof name !== "string" || name === "") {
      throw new TypeError("get(name): name must be a non-empty string");
    }
    return new UserWorker((input, init) => this.#fetch(name, input, init));
  }
  // #fetch is get(name).fetch(input, init): the user Worker's own isolate when it is
  // Shared, else the sidecar, which forwards to its pods.
  async #fetch(name, input, init) {
    const request = new Request(input, init);
    const headers = new Headers(request.headers);
    for (const h of [...headers.keys()]) {
      if (h.startsWith(INTERNAL)) headers.delete(h);
    }
    const { known, code, failed } = await this.#where(name);
    if (failed) return failed;
    if (known.shared) {
      const worker = this.#load(name, known.etag, code);
      if (!worker) return this.#full(name);
      return worker.getEntrypoint().fetch(new Request(request, { headers }));
    }
    headers.set(SCRIPT, name);
    headers.set(PROTO, new URL(request.url).protocol.slice(0, -1));
    const response = await this.#env.fetcher.fetch(new Request(request, { headers }));
    if (response.status === 404 && response.headers.get(ERROR) === "not-found") {
      await response.body?.cancel();
      throw this.#notFound(name);
    }
    return response;
  }
  #notFound(name) {
    this.#placements.delete(name);
    return new Error(`Worker not found: ${name}`);
  }
  // #ask is the sidecar's answer about user Worker name: a Response, or an Error when
  // it is not found.
  async #ask(name, etag) {
    const headers = { [SCRIPT]: name, [RESOLVE]: "1" };
    if (etag) headers["If-None-Match"] = etag;
    const r = await this.#env.fetcher.fetch("http://dispatch/", { headers });
    if (r.status === 404 && r.headers.get(ERROR) === "not-found") {
      await r.body?.cancel();
      throw this.#notFound(name);
    }
    return r;
  }
  // #where is what this isolate knows of user Worker name, asking the sidecar when it
  // is older than TTL_MS; code is the Worker's code when the sidecar just sent it, and
  // failed the sidecar's error response.
  async #where(name) {
    const known = this.#placements.get(name);
    if (known && known.until > Date.now()) return { known };
    const r = await this.#ask(name, known?.etag);
    if (r.status === 304 && known) {
      known.until = Date.now() + TTL_MS;
      return { known };
    }
    if (r.status !== 200) return { failed: r };
    const code = await r.json();
    if (this.#placements.size >= MAX_PLACEMENTS) this.#placements.clear();
    const entry = { shared: code.placement === "Shared", etag: r.headers.get("ETag"), until: Date.now() + TTL_MS };
    this.#placements.set(name, entry);
    return { known: entry, code };
  }
  // #load is the isolate of Shared user Worker name, from code or the sidecar's; null
  // when this process already holds its most Shared user Workers.
  #load(name, etag, code) {
    const key = `${name}@${etag}`;
    if (!this.#loaded.has(key)) {
      if (this.#loaded.size >= this.#env.config.maxShared) return null;
      this.#loaded.add(key);
    }
    return this.#env.loader.get(key, async () => {
      if (!code) {
        const r = await this.#ask(name);
        if (r.status !== 200) throw new Error(`dispatch: user Worker "${name}" is unavailable: its code could not be read`);
        code = await r.json();
      }
      // The code must be the one the key names (an edit since would be another key).
      if (`"${code.id}"` !== etag) throw new Error(`dispatch: user Worker "${name}" changed while it was loaded: call again`);
      return loaderCode(code, this.#env.internet);
    });
  }
  #full(name) {
    const max = this.#env.config.maxShared;
    return new Response(`dispatch: user Worker "${name}" is not loaded: this pod holds its most Shared user Workers, ${max} (the dispatchNamespace binding's maxSharedWorkers; docs/dispatch.md)\n`,
      { status: 503, headers: { "Retry-After": "1" } });
  }
}

// UserWorker is get(name)'s fetcher.
class UserWorker {
  #call;
  constructor(call) {
    this.#call = call;
  }
  fetch(input, init) {
    return this.#call(input, init);
  }
}

export default function makeBinding(env) {
  return new DispatchNamespace(env);
}
