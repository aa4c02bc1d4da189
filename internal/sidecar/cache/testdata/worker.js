// Test Worker of the Cache API tests: /put, /match and /delete run the Cache API on
// caches.default or caches.open(ns) as the JSON body says; /object reads an R2 object
// through the cache (cache-aside), saying whether the answer came from the cache.
async function cacheOf(ns) {
  return ns ? await caches.open(ns) : caches.default;
}

async function api(path, a, env) {
  const cache = await cacheOf(a.ns);
  const req = a.url && new Request(a.url, { headers: a.reqHeaders || {} });
  if (path === "/put") {
    await cache.put(req, new Response(a.body ?? "", { status: a.status || 200, headers: a.headers || {} }));
    return { ok: true };
  }
  if (path === "/match") {
    const r = await cache.match(req);
    if (!r) return { hit: false };
    return { hit: true, status: r.status, headers: Object.fromEntries(r.headers), body: await r.text() };
  }
  if (path === "/delete") return { deleted: await cache.delete(req) };
  if (path === "/object") {
    const key = new Request("https://cdn.example.com/" + a.key);
    const hit = await caches.default.match(key);
    if (hit) return { from: "cache", body: await hit.text() };
    const o = await env.BUCKET.get(a.key);
    const body = await o.text();
    await caches.default.put(key, new Response(body, { headers: { "cache-control": "max-age=300", etag: o.httpEtag } }));
    return { from: "origin", body };
  }
  throw new Error("no route " + path);
}

export default {
  async fetch(req, env) {
    try {
      return Response.json(await api(new URL(req.url).pathname, await req.json(), env));
    } catch (e) {
      return Response.json({ error: String(e.message) });
    }
  },
};
