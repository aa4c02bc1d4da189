// env.<DISPATCHER> of a dispatchNamespace binding (Workers for Platforms): get(name)
// returns a fetcher for the user Worker `name` of the dispatch namespace. Its calls go
// to the pod's sidecar (inner binding `fetcher`, an alias that names the namespace),
// which resolves the user Worker and forwards the request to it; when the namespace has
// no such Worker, fetch() throws "Worker not found", as on Cloudflare
// (https://developers.cloudflare.com/cloudflare-for-platforms/workers-for-platforms/configuration/dynamic-dispatch/).
const SCRIPT = "X-Workerd-Operator-Dispatch-Script";
const PROTO = "X-Workerd-Operator-Dispatch-Proto";
const ERROR = "X-Workerd-Operator-Dispatch-Error";
// The operator's own headers: the dispatch Worker may not set any (the config adds the
// dispatch namespace's).
const INTERNAL = "x-workerd-operator-";

class UserWorker {
  #fetcher;
  #name;
  constructor(fetcher, name) {
    this.#fetcher = fetcher;
    this.#name = name;
  }
  async fetch(input, init) {
    const request = new Request(input, init);
    const headers = new Headers(request.headers);
    for (const name of [...headers.keys()]) {
      if (name.startsWith(INTERNAL)) headers.delete(name);
    }
    headers.set(SCRIPT, this.#name);
    headers.set(PROTO, new URL(request.url).protocol.slice(0, -1));
    const response = await this.#fetcher.fetch(new Request(request, { headers }));
    if (response.status === 404 && response.headers.get(ERROR) === "not-found") {
      await response.body?.cancel();
      throw new Error(`Worker not found: ${this.#name}`);
    }
    return response;
  }
}

class DispatchNamespace {
  #fetcher;
  constructor(fetcher) {
    this.#fetcher = fetcher;
  }
  get(name, args, options) {
    if (typeof name !== "string" || name === "") {
      throw new TypeError("get(name): name must be a non-empty string");
    }
    return new UserWorker(this.#fetcher, name);
  }
}

export default function makeBinding(env) {
  return new DispatchNamespace(env.fetcher);
}
