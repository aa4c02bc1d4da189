// env.MY_WORKFLOW for Worker code: a `wrapped` binding module whose inner
// bindings are `sidecar` (the sidecar that runs the workflow's engine) and `config`
// ({"workflow": "<name>"}). The API follows Cloudflare's Workflow binding: create,
// createBatch, get; an instance has id, status(), pause(), resume(), terminate(),
// restart(), sendEvent({type, payload}). Engine errors are thrown as Error with the
// engine's message (docs/workflows.md).
//
// An engine being replaced (its pod stopping, its successor starting): a call is sent
// again only when the engine provably did not act on it — a read (GET) after any
// transport failure; any call whose connection could not be made (the GET /healthz
// probe that precedes every call that changes state failed: refused, lost, name not
// resolving, or 503 from a stopping sidecar; or the call itself failed to resolve the
// engine's name, notConnected); any call the engine answered 503 with
// X-Workerd-Operator-Not-Processed. It waits with backoff (100 ms doubling to 2 s) for
// up to WAIT_MS (120 s), then throws WorkflowError code "engine.unavailable" with
// retryable = true. A state-changing call whose connection broke after it was sent may
// or may not have been processed: WorkflowError "engine.connection_lost", retryable =
// false, not sent again.
const WAIT_MS = 120000;
const NOT_PROCESSED = "x-workerd-operator-not-processed";

class WorkflowError extends Error {
  constructor(code, message) { super(message); this.name = "WorkflowError"; this.code = code; }
}

// Away is an attempt that did not reach the engine; call() waits and sends again.
class Away extends Error {}

async function reachable(sidecar) {
  let res;
  try {
    res = await sidecar.fetch("http://sidecar/healthz");
  } catch (e) {
    throw new Away(`the engine could not be reached: ${e?.message ?? e}`);
  }
  await res.arrayBuffer();
  if (res.status !== 200) throw new Away(`the engine's sidecar answered ${res.status} (stopping)`);
}

// notConnected: fetch() failed before the request was sent. In the pinned workerd a
// plain-HTTP fetch to an external service fails with "internal error; reference = ..."
// when the connection cannot be made because the name does not resolve (the engine
// pod is not ready: it has no DNS record); a failure on a made connection is
// "Network connection lost." (docs/workflows.md "Code changes and rollouts").
function notConnected(e) {
  return /^internal error; reference = /.test(String(e?.message ?? ""));
}

async function attempt(sidecar, method, path, body) {
  if (method !== "GET") await reachable(sidecar);
  let res;
  try {
    res = await sidecar.fetch("http://sidecar/workflows/" + path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    if (method === "GET" || notConnected(e)) throw new Away(`the engine could not be reached: ${e?.message ?? e}`);
    const err = new WorkflowError("engine.connection_lost", `workflows: the connection to the engine broke while ${method} ${path} was in flight (${e?.message ?? e}); it may or may not have been processed, so it was not sent again`);
    err.retryable = false;
    throw err;
  }
  if (res.status === 503 && res.headers.has(NOT_PROCESSED)) {
    await res.arrayBuffer();
    throw new Away("the engine is stopping (its pod is being replaced)");
  }
  return res;
}

async function call(sidecar, method, path, body) {
  const start = Date.now();
  let res;
  for (let n = 1; !res; n++) {
    try {
      res = await attempt(sidecar, method, path, body);
    } catch (e) {
      if (!(e instanceof Away)) throw e;
      const ms = Math.min(100 * 2 ** (n - 1), 2000); // failure.js backoff(n, 100, 2000)
      if (Date.now() - start + ms > WAIT_MS) {
        const err = new WorkflowError("engine.unavailable", `workflows: ${e.message}; waited ${Math.round((Date.now() - start) / 1000)} s for it (its pod is being replaced or is not ready). The request was not processed: retry later`);
        err.retryable = true;
        throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
  }
  const text = await res.text();
  let data;
  try { data = JSON.parse(text); } catch { data = undefined; }
  if (!res.ok) {
    const err = data?.error;
    throw refusal(err?.code, err?.message ?? `workflows: sidecar answered ${res.status}: ${text.slice(0, 200)}`, res.status, body?.id);
  }
  return data;
}

// refusal is the engine's refusal as the Worker sees it. The refusals the pinned
// workerd's own engine also makes are what it throws (an Error, the WorkflowError's name
// in its message, as it arrives over JS RPC; internal/workflows TestMatchesBuiltInEngine);
// the others are WorkflowErrors with the engine's code.
function refusal(code, message, status, id) {
  switch (code) {
    case "instance.invalid_id": return new Error("WorkflowError: Workflow instance has invalid id");
    case "instance.not_found": return new Error("instance.not_found");
    case INSTANCE_EXISTS: return new Error(`WorkflowError: (instance.already_exists) Workflow instance with id "${id}" already exists`);
  }
  return new WorkflowError(code ?? String(status), message);
}

// INSTANCE_EXISTS is the engine's code for an id in use (api.CodeInstanceExists).
const INSTANCE_EXISTS = "10405";

class WorkflowInstance {
  #sidecar; #wf;
  constructor(sidecar, wf, id) { this.#sidecar = sidecar; this.#wf = wf; this.id = id; }
  #path(op) { return `${encodeURIComponent(this.#wf)}/instances/${encodeURIComponent(this.id)}${op ? "/" + op : ""}`; }
  async status() {
    const i = await call(this.#sidecar, "GET", this.#path());
    const out = { status: i.status, output: i.output ?? null, error: i.error ?? undefined };
    if (out.error === undefined) delete out.error;
    return out;
  }
  async pause() { await call(this.#sidecar, "POST", this.#path("pause"), {}); }
  async resume() { await call(this.#sidecar, "POST", this.#path("resume"), {}); }
  async terminate() { await call(this.#sidecar, "POST", this.#path("terminate"), {}); }
  async restart() { await call(this.#sidecar, "POST", this.#path("restart"), {}); }
  async sendEvent({ type, payload } = {}) {
    await call(this.#sidecar, "POST", this.#path("events"), { type, payload });
  }
}

class Workflow {
  #sidecar; #wf;
  constructor(sidecar, wf) { this.#sidecar = sidecar; this.#wf = wf; }
  async create(options = {}) {
    // "" is an invalid id, not a request for a generated one (the engine's API cannot tell
    // them apart): Cloudflare's isValidWorkflowInstanceId rejects it.
    if (options.id === "") throw refusal("instance.invalid_id");
    const i = await call(this.#sidecar, "POST", `${encodeURIComponent(this.#wf)}/instances`, { id: options.id, params: options.params });
    return new WorkflowInstance(this.#sidecar, this.#wf, i.id);
  }
  async createBatch(options) {
    if (Array.isArray(options) && options.length === 0) {
      throw new WorkflowError("batch.invalid_size", "WorkflowError: batchCreate should have at least 1 instance");
    }
    const body = Array.isArray(options) ? { instances: options } : options;
    const r = await call(this.#sidecar, "POST", `${encodeURIComponent(this.#wf)}/batch`, body);
    const created = r.created.map((i) => new WorkflowInstance(this.#sidecar, this.#wf, i.id));
    if (Array.isArray(options)) return created; // deprecated array form
    return { created, errors: r.errors };
  }
  async get(id) {
    await call(this.#sidecar, "GET", `${encodeURIComponent(this.#wf)}/instances/${encodeURIComponent(id)}`);
    return new WorkflowInstance(this.#sidecar, this.#wf, id);
  }
}

export default function makeBinding(env) {
  return new Workflow(env.sidecar, env.config.workflow);
}
