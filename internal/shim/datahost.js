// datahost.js: the Worker of a data store's host pod (docs/kv.md, docs/d1.md,
// docs/queues.md). The store itself is workerd's built-in Worker (/workerd/kv.js,
// /workerd/d1.js, /workerd/queues.js) behind the gateway socket; this module answers the
// pod's plain http and rpc sockets, which must not expose the store, and fronts D1.
import { WorkerEntrypoint } from "cloudflare:workers";

export default {
  fetch() {
    return new Response("this pod hosts a data store: reach it through a kvNamespace, d1Database or queue binding\n", { status: 404 });
  },
};

// Migrations of D1 (env.MIGRATIONS: {table, files: [{name, sql}]}, in order), applied
// once per process before the first call reaches the database. Each file runs with its
// record in the table in one call of /workerd/d1.js, so one transaction: a file is
// applied and recorded, or neither. The table is wrangler's
// (packages/wrangler/src/d1/migrations/helpers.ts in cloudflare/workers-sdk).
let migrated;
const READY_PATH = "/_workerd-operator/ready";

async function migrate(env) {
  const m = env.MIGRATIONS;
  if (!m || !Array.isArray(m.files) || m.files.length === 0) return;
  const table = `"${m.table}"`;
  const q = (sql, params = []) => ({ sql, params });
  const run = (queries) => env.STORE.query({ queries });
  await run([q(`CREATE TABLE IF NOT EXISTS ${table}(
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT UNIQUE,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)`)]);
  const res = await run([q(`SELECT name FROM ${table}`)]);
  const done = new Set((res.results?.[0]?.data?.rows ?? []).map((r) => r[0]));
  for (const f of m.files) {
    if (done.has(f.name)) continue;
    try {
      await run([q(f.sql), q(`INSERT INTO ${table} (name) VALUES (?)`, [f.name])]);
    } catch (e) {
      throw new Error(`D1 migration ${f.name} failed: ${e && e.message ? e.message : e}`);
    }
  }
}

// lastLogged is the last migration error logged: the kubelet asks every few seconds,
// the log says it once per distinct error.
let lastLogged;

function logMigrationError(e) {
  const msg = String(e && e.message ? e.message : e);
  if (msg === lastLogged) return;
  lastLogged = msg;
  console.error(`workerd-operator: D1 host not ready: ${msg}`);
}

function ready(env) {
  migrated ??= migrate(env).catch((e) => {
    migrated = undefined;
    throw e;
  });
  return migrated;
}

// D1Gateway is what the gateway socket serves on a D1Database's pod: the two protocols
// of the d1-api binding (RPC query() and POST /query, /execute), after the migrations.
export class D1Gateway extends WorkerEntrypoint {
  async query(arg) {
    await ready(this.env);
    return this.env.STORE.query(arg);
  }

  async fetch(request) {
    // The host's readiness (health.js): ready once the migrations are applied.
    // The answer says "not ready" only: /readyz needs no certificate, so any namespace
    // can ask; the migration and its error go to the workerd container's log.
    if (new URL(request.url).pathname === READY_PATH) {
      return ready(this.env).then(
        () => new Response("ready\n"),
        (e) => {
          logMigrationError(e);
          return new Response("D1 migrations not applied (the host pod's workerd log says why)", { status: 503 });
        },
      );
    }
    await ready(this.env);
    return this.env.STORE.fetch(request);
  }
}

// QueueGateway is what the gateway socket serves on a Queue's pod: workerd's queues.js,
// its refusals marked with the CF-Queues-Error-Code and CF-Queues-Error-Cause headers of
// Cloudflare's error codes (https://developers.cloudflare.com/queues/reference/error-codes/),
// which workerd's queue binding puts in the error it throws ("Message size out of bounds
// (10204)") from compatibility date 2026-03-12 (queue_expose_error_codes); before it, the
// binding says "Queue send failed: Payload Too Large" as it always did. queues.js sends
// neither header, which the binding reports as "Unknown Internal Error (15000)".
export class QueueGateway extends WorkerEntrypoint {
  async fetch(request) {
    const res = await this.env.STORE.fetch(request);
    if (res.ok) return res;
    const text = await res.text();
    const [code, cause] = queueError(res.status, text);
    const headers = new Headers(res.headers);
    headers.set("CF-Queues-Error-Code", String(code));
    headers.set("CF-Queues-Error-Cause", cause);
    return new Response(text, { status: res.status, statusText: res.statusText, headers });
  }
}

// queueError maps a refusal of queues.js (its status and its answer's text) to
// Cloudflare's error code and cause.
function queueError(status, text) {
  if (status === 413) {
    if (text.includes("batch message count")) return [10206, "Batch count out of bounds"];
    if (text.includes("batch size")) return [10205, "Batch size out of bounds"];
    return [10204, "Message size out of bounds"];
  }
  if (status === 429) return [10250, "Queue is overloaded"];
  return [15000, `Unknown Internal Error: HTTP ${status} ${text.slice(0, 200)}`];
}
