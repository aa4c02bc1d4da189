// Test Worker of the R2 conformance tests: POST /call runs env.BUCKET[method](...args)
// and answers what the result shows a Worker. {"$date": ms} in args is a Date,
// {"$headers": {...}} a Headers, {"$bytes": n} an ArrayBuffer of n bytes.
function revive(v) {
  if (Array.isArray(v)) return v.map(revive);
  if (v && typeof v === "object") {
    if ("$date" in v) return new Date(v.$date);
    if ("$headers" in v) return new Headers(v.$headers);
    if ("$bytes" in v) return new Uint8Array(v.$bytes).fill(120).buffer;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, revive(x)]));
  }
  return v;
}

async function describe(o) {
  if (o === null || o === undefined) return null;
  if ("objects" in o) {
    return { objects: await Promise.all(o.objects.map(describe)), truncated: o.truncated,
      cursor: o.cursor, delimitedPrefixes: o.delimitedPrefixes };
  }
  if (!("etag" in o)) return o;
  const d = { key: o.key, version: o.version, size: o.size, etag: o.etag, httpEtag: o.httpEtag,
    uploaded: o.uploaded.getTime(), httpMetadata: o.httpMetadata, customMetadata: o.customMetadata,
    range: o.range, checksums: o.checksums.toJSON(), storageClass: o.storageClass };
  if ("body" in o) d.body = await o.text();
  return d;
}

// pattern is byte i of the test's large objects.
function fill(buf, start) {
  for (let i = 0; i < buf.length; i++) buf[i] = (start + i) * 7 % 251;
  return buf;
}

async function sha256(stream) {
  const d = new crypto.DigestStream("SHA-256");
  await stream.pipeTo(d);
  return [...new Uint8Array(await d.digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// multipart uploads size bytes in parts of partSize generated in the Worker and
// answers the completed object and the SHA-256 of what get returns.
async function multipart(env, key, size, partSize) {
  const up = await env.BUCKET.createMultipartUpload(key, { customMetadata: { parts: "many" } });
  const parts = [];
  for (let off = 0, n = 1; off < size; off += partSize, n++) {
    parts.push(await up.uploadPart(n, fill(new Uint8Array(Math.min(partSize, size - off)), off)));
  }
  const obj = await up.complete(parts);
  const got = await env.BUCKET.get(key);
  return { object: await describe(obj), parts: parts.length, size: got.size, sha256: await sha256(got.body) };
}

// lifecycle: complete() with the parts out of order, then a second complete(), an
// abort() after complete and two abort()s of another upload; each outcome or error text.
async function lifecycle(env, key) {
  const settle = (p) => p.then(() => "ok", (e) => String(e.message));
  const up = await env.BUCKET.createMultipartUpload(key);
  const p1 = await up.uploadPart(1, new Uint8Array(5 * 1024 * 1024).fill(97));
  const p2 = await up.uploadPart(2, "tail");
  const out = { complete: await settle(up.complete([p2, p1])) };
  out.size = (await env.BUCKET.head(key))?.size ?? null;
  out.secondComplete = await settle(up.complete([p1, p2]));
  out.abortAfterComplete = await settle(up.abort());
  const other = await env.BUCKET.createMultipartUpload(key + "-aborted");
  out.abort = await settle(other.abort());
  out.secondAbort = await settle(other.abort());
  return out;
}

// listAll pages through prefix with limit, answering the keys in order and the pages.
async function listAll(env, prefix, limit) {
  const keys = [];
  let cursor, pages = 0;
  for (;;) {
    const page = await env.BUCKET.list({ prefix, limit, cursor });
    pages++;
    for (const o of page.objects) keys.push(o.key);
    if (!page.truncated) break;
    cursor = page.cursor;
  }
  return { keys, pages };
}

export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    // /stream/<key>: PUT stores the request body, GET answers the object (benchmarks).
    if (url.pathname.startsWith("/stream/")) {
      const key = url.pathname.slice("/stream/".length);
      if (req.method === "PUT") {
        const o = await env.BUCKET.put(key, req.body);
        return Response.json({ size: o.size });
      }
      const o = await env.BUCKET.get(key);
      return o ? new Response(o.body) : new Response("not found", { status: 404 });
    }
    try {
      const a = await req.json();
      let result;
      if (url.pathname === "/call") {
        result = await describe(await env.BUCKET[a.method](...revive(a.args)));
      } else if (url.pathname === "/multipart") {
        result = await multipart(env, a.key, a.size, a.partSize);
      } else if (url.pathname === "/lifecycle") {
        result = await lifecycle(env, a.key);
      } else if (url.pathname === "/listall") {
        result = await listAll(env, a.prefix, a.limit);
      } else if (url.pathname === "/resume") {
        const up = env.BUCKET.resumeMultipartUpload(a.key, a.uploadId);
        result = await describe(await up[a.method](...revive(a.args)));
      }
      return Response.json({ ok: true, result });
    } catch (e) {
      return Response.json({ ok: false, error: String(e.message) });
    }
  },
};
