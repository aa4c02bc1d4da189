// Conformance cases of the data bindings (internal/render datastores_test.go): GET
// /<case> runs cases[<case>](env) and answers {value} or {error}.
const text = async (s) => new Response(s).text();
const err = async (f) => {
  try {
    await f();
    return "no error";
  } catch (e) {
    return String(e.message);
  }
};

const cases = {
  // KV (https://developers.cloudflare.com/kv/api/)
  "kv-text": async (env) => (await env.KV.put("t", "hello"), env.KV.get("t")),
  "kv-text-type": async (env) => (await env.KV.put("t", "hello"), env.KV.get("t", { type: "text" })),
  "kv-missing": (env) => env.KV.get("missing"),
  "kv-json": async (env) => (await env.KV.put("j", '{"a":[1,2]}'), env.KV.get("j", "json")),
  "kv-json-object": async (env) => (await env.KV.put("j", '{"a":[1,2]}'), env.KV.get("j", { type: "json" })),
  "kv-arrayBuffer": async (env) => {
    await env.KV.put("b", new Uint8Array([1, 2, 255]));
    return [...new Uint8Array(await env.KV.get("b", "arrayBuffer"))];
  },
  "kv-stream": async (env) => (await env.KV.put("s", "streamed"), text(await env.KV.get("s", "stream"))),
  "kv-metadata": async (env) => {
    await env.KV.put("m", "v", { metadata: { owner: "x", n: 1 } });
    return env.KV.getWithMetadata("m");
  },
  "kv-metadata-json": async (env) => {
    await env.KV.put("m", '{"v":1}', { metadata: { n: 2 } });
    return env.KV.getWithMetadata("m", { type: "json" });
  },
  "kv-metadata-missing": (env) => env.KV.getWithMetadata("missing"),
  "kv-metadata-1024": async (env) => {
    await env.KV.put("m", "v", { metadata: "x".repeat(1022) });
    return (await env.KV.getWithMetadata("m")).metadata.length;
  },
  "kv-metadata-1025": (env) => err(() => env.KV.put("m", "v", { metadata: "x".repeat(1023) })),
  "kv-ttl-60": async (env) => {
    const before = Math.floor(Date.now() / 1000);
    await env.KV.put("e", "v", { expirationTtl: 60 });
    const k = (await env.KV.list({ prefix: "e" })).keys.find((k) => k.name === "e");
    return k.expiration - before >= 60 && k.expiration - before <= 61;
  },
  "kv-ttl-59": (env) => err(() => env.KV.put("e", "v", { expirationTtl: 59 })),
  "kv-expiration-past": (env) => err(() => env.KV.put("e", "v", { expiration: Math.floor(Date.now() / 1000) + 10 })),
  "kv-delete": async (env) => {
    await env.KV.put("d", "v");
    await env.KV.delete("d");
    return [await env.KV.get("d"), await env.KV.delete("never-there")];
  },
  "kv-list": async (env) => {
    for (const k of ["l/a", "l/b", "l/c", "m/a"]) await env.KV.put(k, k, { metadata: { k } });
    const p1 = await env.KV.list({ prefix: "l/", limit: 2 });
    const p2 = await env.KV.list({ prefix: "l/", cursor: p1.cursor });
    return {
      page1: p1.keys.map((k) => k.name), complete1: p1.list_complete, cursor1: typeof p1.cursor === "string" && p1.cursor.length > 0,
      page2: p2.keys.map((k) => k.name), complete2: p2.list_complete, metadata: p2.keys[0].metadata,
    };
  },
  "kv-bulk": async (env) => {
    await env.KV.put("g1", "one");
    await env.KV.put("g2", '{"two":2}');
    return [Object.fromEntries(await env.KV.get(["g1", "nope"])), Object.fromEntries(await env.KV.get(["g2"], "json"))];
  },
  "kv-bulk-100": async (env) => (await env.KV.get(Array.from({ length: 100 }, (_, i) => "k" + i))).size,
  "kv-bulk-101": (env) => err(() => env.KV.get(Array.from({ length: 101 }, (_, i) => "k" + i))),
  "kv-key-512": async (env) => (await env.KV.put("k".repeat(512), "v"), env.KV.get("k".repeat(512))),
  "kv-key-513": (env) => err(() => env.KV.put("k".repeat(513), "v")),
  "kv-value-large": async (env) => {
    await env.KV.put("big", "v".repeat(200 * 1024));
    return (await env.KV.get("big")).length;
  },
  "kv-value-25MiB": async (env) => {
    await env.KV.put("huge", new Uint8Array(25 * 1024 * 1024));
    return (await env.KV.get("huge", "arrayBuffer")).byteLength;
  },
  "kv-value-over-25MiB": (env) => err(() => env.KV.put("huge2", new Uint8Array(25 * 1024 * 1024 + 1))),

  // Queues (https://developers.cloudflare.com/queues/configuration/javascript-apis/)
  "q-send": async (env) => Object.keys((await env.Q.send({ id: "plain" })).metadata.metrics).sort(),
  "q-send-types": async (env) => {
    await env.Q.send("text-body", { contentType: "text" });
    await env.Q.send({ id: "json-body" }, { contentType: "json" });
    await env.Q.send(new Uint8Array([1, 2, 3]), { contentType: "bytes" });
    await env.Q.send(new Date(5), { contentType: "v8" });
    return "sent";
  },
  "q-send-batch": async (env) => typeof (await env.Q.sendBatch([{ body: { id: "batch-1" } }, { body: { id: "batch-2" }, delaySeconds: 1 }])).metadata.metrics.backlogCount,
  "q-delay": async (env) => void (await env.Q.send({ id: "delayed" }, { delaySeconds: 2 })),
  "q-retry-dlq": async (env) => void (await env.Q.send({ id: "always-fails", fail: true })),
  "q-retry-all": async (env) => void (await env.Q.sendBatch([{ body: { id: "ra-1", retryAllOnce: true } }])),
  "q-ack-all": async (env) => void (await env.Q.sendBatch([{ body: { id: "aa-1", ackAll: true } }])),
  // QD is the same queue with delivery_delay 2 (the test's dataBindings).
  "q-delivery-delay": async (env) => void (await env.QD.send({ id: "pd-send", sentAt: Date.now() })),
  "q-delivery-delay-batch": async (env) => void (await env.QD.sendBatch([{ body: { id: "pd-batch", sentAt: Date.now() } }])),
  "q-delivery-delay-overridden": async (env) => {
    await env.QD.send({ id: "pd-send-0", sentAt: Date.now() }, { delaySeconds: 0 });
    await env.QD.sendBatch([{ body: { id: "pd-batch-msg-0", sentAt: Date.now() }, delaySeconds: 0 }]);
  },
  "q-too-big": (env) => err(() => env.Q.send("x".repeat(128 * 1000 + 1), { contentType: "text" })),
  "q-too-big-1mib": (env) => err(() => env.Q.send("x".repeat(1 << 20), { contentType: "text" })),
  "q-too-big-v8": (env) => err(() => env.Q.send({ s: "x".repeat(200000) })),
  "q-batch-too-big": (env) => err(() => env.Q.sendBatch([1, 2, 3].map(() => ({ body: "x".repeat(100000), contentType: "text" })))),
  "q-batch-101": (env) => err(() => env.Q.sendBatch(Array.from({ length: 101 }, (_, i) => ({ body: i })))),
  "q-deliveries": async (env) => {
    const out = {};
    let cursor;
    do {
      const page = await env.KV.list({ prefix: "q/", cursor });
      for (const k of page.keys) out[k.name] = JSON.parse(await env.KV.get(k.name));
      cursor = page.list_complete ? undefined : page.cursor;
    } while (cursor);
    return out;
  },

  // Benchmarks (datastores_bench_test.go).
  "bench-setup": async (env) => {
    if (env.KV) await env.KV.put("bench", "value");
    if (env.DB) await env.DB.batch([env.DB.prepare("CREATE TABLE IF NOT EXISTS bench (id INTEGER PRIMARY KEY, v TEXT)"), env.DB.prepare("INSERT OR REPLACE INTO bench VALUES (1, 'one')")]);
    return "ok";
  },
  "bench-kv-get": (env) => env.KV.get("bench"),
  "bench-kv-put": async (env) => (await env.KV.put("bench", "value"), "ok"),
  "bench-q-send": async (env) => (await env.Q.send({ n: 1 }), "ok"),
  "bench-d1-point": (env) => env.DB.prepare("SELECT v FROM bench WHERE id = ?").bind(1).first("v"),

  // Reads only: what the cases above wrote (the restart check).
  "kv-read": async (env) => [await env.KV.get("t"), (await env.KV.get("huge", "arrayBuffer")).byteLength, (await env.KV.getWithMetadata("l/c")).metadata],
  "d1-read": async (env) => [await env.DB.prepare("SELECT count(*) AS n FROM r").first("n"), await env.DB.prepare("SELECT * FROM w").raw()],

  // D1 (https://developers.cloudflare.com/d1/worker-api/)
  "d1-migrated": (env) => env.DB.prepare("SELECT id, name FROM d1_migrations ORDER BY id").raw(),
  "d1-migrated-table": (env) => env.DB.prepare("SELECT count(*) AS n FROM notes").first("n"),
  "d1-exec": (env) => env.DB.exec("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT);\nDELETE FROM t;").then((r) => r.count),
  "d1-run": async (env) => {
    await env.DB.exec("CREATE TABLE IF NOT EXISTS r (id INTEGER PRIMARY KEY, v TEXT)");
    const res = await env.DB.prepare("INSERT INTO r (v) VALUES (?1), (?2)").bind("a", "b").run();
    return { success: res.success, results: res.results, changes: res.meta.changes, rows_written: res.meta.rows_written,
      last_row_id: res.meta.last_row_id > 0, duration: typeof res.meta.duration, rows_read: typeof res.meta.rows_read };
  },
  "d1-first": async (env) => {
    await env.DB.exec("CREATE TABLE IF NOT EXISTS f (id INTEGER PRIMARY KEY, v TEXT)");
    await env.DB.prepare("INSERT INTO f (id, v) VALUES (1, 'one') ON CONFLICT DO NOTHING").run();
    return [await env.DB.prepare("SELECT * FROM f WHERE id = ?").bind(1).first(), await env.DB.prepare("SELECT v FROM f").first("v"),
      await env.DB.prepare("SELECT * FROM f WHERE id = 99").first()];
  },
  "d1-all": async (env) => {
    await env.DB.exec("CREATE TABLE IF NOT EXISTS a (id INTEGER PRIMARY KEY, v TEXT)");
    await env.DB.batch([env.DB.prepare("DELETE FROM a"), env.DB.prepare("INSERT INTO a VALUES (1, 'x'), (2, 'y')")]);
    const r = await env.DB.prepare("SELECT * FROM a ORDER BY id").all();
    return { success: r.success, results: r.results, rows_read: r.meta.rows_read };
  },
  "d1-raw": async (env) => {
    await env.DB.exec("CREATE TABLE IF NOT EXISTS w (id INTEGER PRIMARY KEY, v TEXT)");
    await env.DB.prepare("INSERT OR REPLACE INTO w VALUES (1, 'x')").run();
    return [await env.DB.prepare("SELECT * FROM w").raw(), await env.DB.prepare("SELECT * FROM w").raw({ columnNames: true })];
  },
  "d1-batch-rollback": async (env) => {
    await env.DB.exec("CREATE TABLE IF NOT EXISTS b (id INTEGER PRIMARY KEY)");
    await env.DB.prepare("DELETE FROM b").run();
    const e = await err(() => env.DB.batch([env.DB.prepare("INSERT INTO b VALUES (1)"), env.DB.prepare("INSERT INTO nope VALUES (1)")]));
    return [e, await env.DB.prepare("SELECT count(*) AS n FROM b").first("n")];
  },
  "d1-error": (env) => err(() => env.DB.prepare("SELECT * FROM nope").all()),
  "d1-syntax-error": (env) => err(() => env.DB.prepare("SELEC 1").all()),
  "d1-session": async (env) => {
    const s = env.DB.withSession("first-primary");
    const r = await s.prepare("SELECT 1 AS one").first("one");
    const b = s.getBookmark();
    const s2 = env.DB.withSession(b);
    return [r, typeof b, await s2.prepare("SELECT 2 AS two").first("two")];
  },
};

// The consumer (docs/queues.md): records every delivery in KV, q/<queue>/<id>/<attempt>,
// then acks, retries or acts on the whole batch as the body asks.
async function consume(batch, env) {
  let all = "";
  for (const m of batch.messages) {
    const b = m.body;
    const id = b?.id ?? (typeof b === "string" ? b : Object.prototype.toString.call(b));
    const kind = Object.prototype.toString.call(b);
    let shown = b instanceof ArrayBuffer ? [...new Uint8Array(b)] : b instanceof Date ? b.getTime() : b;
    // A body with sentAt records whether it waited 2 s (delivery_delay), not the time.
    const waited2s = b?.sentAt === undefined ? undefined : Date.now() - b.sentAt >= 2000;
    if (waited2s !== undefined) shown = { id: b.id };
    await env.KV.put(`q/${batch.queue}/${id}/${m.attempts}`, JSON.stringify({ kind, body: shown, attempts: m.attempts, ts: m.timestamp instanceof Date, waited2s }));
    if (batch.queue.endsWith("-dlq")) m.ack(); // dead letters: recorded, done
    else if (b?.ackAll) all = "ack";
    else if (b?.retryAllOnce) all = m.attempts === 1 ? "retry" : "ack";
    else if (b?.fail) m.retry();
    else m.ack();
  }
  if (all === "ack") batch.ackAll();
  if (all === "retry") batch.retryAll();
}

export default {
  queue: consume,
  async fetch(request, env) {
    const name = new URL(request.url).pathname.slice(1);
    const c = cases[name];
    if (!c) return Response.json({ error: `no case ${name}` }, { status: 404 });
    try {
      return Response.json({ value: (await c(env)) ?? null });
    } catch (e) {
      return Response.json({ error: String(e.message) });
    }
  },
};
