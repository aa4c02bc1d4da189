// env.MY_WORKFLOW for Worker code: a `wrapped` binding module whose inner
// bindings are `sidecar` (the sidecar that runs the workflow's engine) and `config`
// ({"workflow": "<name>"}). The API follows Cloudflare's Workflow binding: create,
// createBatch, get; an instance has id, status(), pause(), resume(), terminate(),
// restart(), sendEvent({type, payload}). Engine errors are thrown as Error with the
// engine's message (docs/workflows.md).

class WorkflowError extends Error {
  constructor(code, message) { super(message); this.name = "WorkflowError"; this.code = code; }
}

async function call(sidecar, method, path, body) {
  const res = await sidecar.fetch("http://sidecar/workflows/" + path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let data;
  try { data = JSON.parse(text); } catch { data = undefined; }
  if (!res.ok) {
    const err = data?.error;
    throw new WorkflowError(err?.code ?? String(res.status), err?.message ?? `workflows: sidecar answered ${res.status}: ${text.slice(0, 200)}`);
  }
  return data;
}

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
