// ingress.js: the worker behind workerd's `http` socket, in front of the Worker's http
// service (env.TARGET: the user's Worker, or the assets service in front of it).
//
// It keeps Cloudflare's loop limit
// (https://developers.cloudflare.com/workers/observability/errors/#loop-limit): the
// CF-EW-Via header holds how many Worker invocations are left; each invocation takes
// one, and a request arriving with none left is answered with error 1019 without
// invoking the Worker. A request without the header (or with a value that is not a
// count, or above the limit) starts at the limit, so a client cannot lengthen a chain.
// A Worker that forwards its request (fetch(request)) carries the decremented count on.
//
// It sets request.cf (docs/request-cf.md). The http socket has no cfBlobHeader, so no
// header of the client's becomes request.cf: workerd gives this worker
// cf.clientIp, the connection's peer, and nothing else. The sidecar
// (internal/requestcf) turns the peer and, for a trusted proxy, its CF-Connecting-IP
// and X-Forwarded-For into the client's address and cf object; answers are kept per
// peer (per peer and headers for a trusted proxy), so a client costs one sidecar call.
// The Worker gets that cf, CF-Connecting-IP set to the client and the peer appended to
// X-Forwarded-For, as Cloudflare does
// (https://developers.cloudflare.com/fundamentals/reference/http-headers/).
//   env.LOOP_LIMIT      invocations a chain may make (internal/limits loop_invocations)
//   env.LOOP_STATUS     the HTTP status of the 1019 answer (docs/pod-contract.md "Loop limit")
//   env.SIDECAR         the pod's sidecar; env.REQUEST_CF_PATH its request.cf endpoint
//
// In a gradual deployment (docs/versions.md) it picks a version for each request, as
// Cloudflare does
// (https://developers.cloudflare.com/workers/versions-and-deployments/gradual-deployments/):
// the version Cloudflare-Workers-Version-Overrides names for this Worker when deployed,
// else the share a hash of Cloudflare-Workers-Version-Key falls in (version affinity),
// else a random share. A request for the other version goes on to its pods with the
// hop token and the client's address and cf; the receiving ingress trusts those only
// with the token, and serves the request itself.
//   env.WORKER_NAME, env.VERSIONS ([{id, percentage}]), env.SELF_VERSION
//   env.OTHER_VERSION   the other version's pods; env.SPLIT_TOKEN the hop token
const header = "CF-EW-Via";
const connectingIP = "CF-Connecting-IP";
const forwardedFor = "X-Forwarded-For";
const overridesHeader = "Cloudflare-Workers-Version-Overrides";
const versionKeyHeader = "Cloudflare-Workers-Version-Key";
const hopTokenHeader = "X-Workerd-Operator-Split-Token";
const hopClientHeader = "X-Workerd-Operator-Split-Client";
// Answers kept per isolate: the oldest is dropped beyond this many.
const cacheEntries = 10000;
const byPeer = new Map(); // peers that are not trusted proxies: their answer ignores headers
const byProxy = new Map(); // trusted proxies: peer, CF-Connecting-IP and X-Forwarded-For

// invocationsLeft reads the header's count: the limit when absent, malformed or above it.
export function invocationsLeft(value, limit) {
  if (value === null || !/^[0-9]{1,6}$/.test(value.trim())) return limit;
  return Math.min(Number(value.trim()), limit);
}

// peerAddress is workerd's cf.clientIp without its port: "10.0.0.1:5000" or
// "[::1]:5000" becomes "10.0.0.1" or "::1".
export function peerAddress(clientIp) {
  if (!clientIp) return "";
  if (clientIp.startsWith("[")) return clientIp.slice(1, clientIp.indexOf("]"));
  const i = clientIp.lastIndexOf(":");
  return i > 0 && clientIp.indexOf(":") === i ? clientIp.slice(0, i) : clientIp;
}

function remember(cache, key, value) {
  if (cache.size >= cacheEntries) cache.delete(cache.keys().next().value);
  cache.set(key, value);
}

// requestCf is the sidecar's answer for this request: { clientIp, trustedPeer, cf }.
async function requestCf(request, env, peer) {
  const hit = byPeer.get(peer);
  if (hit) return hit;
  const connecting = request.headers.get(connectingIP) ?? "";
  const forwarded = request.headers.get(forwardedFor) ?? "";
  const key = `${peer}|${connecting}|${forwarded}`;
  const proxied = byProxy.get(key);
  if (proxied) return proxied;
  const q = new URLSearchParams({ peer, connecting, forwarded });
  const r = await env.SIDECAR.fetch(`http://sidecar${env.REQUEST_CF_PATH}?${q}`);
  if (!r.ok) throw new Error(`request.cf: sidecar answered ${r.status}: ${await r.text()}`);
  const res = await r.json();
  if (res.trustedPeer) remember(byProxy, key, res);
  else remember(byPeer, peer, res);
  return res;
}

// overriddenVersion is the version id a Cloudflare-Workers-Version-Overrides value
// (a structured-field dictionary: worker="version-id", ...) names for worker, or "".
export function overriddenVersion(value, worker) {
  if (!value) return "";
  for (const member of value.split(",")) {
    const m = /^\s*([a-z0-9_*.-]+)\s*=\s*"([^"]*)"\s*$/.exec(member);
    if (m && m[1] === worker) return m[2];
  }
  return "";
}

// keyBucket maps a version key to 0..99 (FNV-1a, 32 bits): the same key, the same share.
export function keyBucket(key) {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % 100;
}

// pickVersion is the version id that serves request: an override naming a deployed
// version, else the share the key's bucket (or a random one) falls in, the versions'
// shares laid end to end in their order.
export function pickVersion(headers, worker, versions, random = Math.random) {
  const o = overriddenVersion(headers.get(overridesHeader), worker);
  if (o && versions.some((v) => v.id === o)) return o;
  const key = headers.get(versionKeyHeader);
  const bucket = key !== null ? keyBucket(key) : Math.floor(random() * 100);
  let end = 0;
  for (const v of versions) {
    end += v.percentage;
    if (bucket < end) return v.id;
  }
  return versions[versions.length - 1].id;
}

// hop is how the request arrived in a split: {forwarded: true, res} when another pod's
// ingress sent it on with the right token (res: the client it vouched for), else
// {forwarded: false}. The hop headers are removed either way: a client cannot set them.
function hop(request, env) {
  const token = request.headers.get(hopTokenHeader);
  const client = request.headers.get(hopClientHeader);
  request.headers.delete(hopTokenHeader);
  request.headers.delete(hopClientHeader);
  if (!env.SPLIT_TOKEN || token === null || !sameText(token, env.SPLIT_TOKEN)) return { forwarded: false };
  try {
    return { forwarded: true, res: JSON.parse(client ?? "{}") };
  } catch {
    return { forwarded: true, res: {} };
  }
}

// sameText compares two strings in time that depends on their length only.
function sameText(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

// forward sends request on to the other version's pods. When they cannot be reached (a
// rollout just removed them) a GET or HEAD is served here instead; a request with a body
// is not sent twice: its error is the answer.
async function forward(request, env, res) {
  const idempotent = request.method === "GET" || request.method === "HEAD";
  const local = idempotent ? new Request(request) : null;
  request.headers.set(hopTokenHeader, env.SPLIT_TOKEN);
  request.headers.set(hopClientHeader, JSON.stringify({ clientIp: res.clientIp ?? "", cf: res.cf ?? null }));
  try {
    return await env.OTHER_VERSION.fetch(request);
  } catch (e) {
    if (!local) throw e;
    console.error(`version split: the other version did not answer, serving here: ${e}`);
    return env.TARGET.fetch(local, { cf: res.cf });
  }
}

export default {
  async fetch(request, env) {
    // Every ingress removes the hop headers; one whose Worker has split trusts them
    // with the right token (a pod may receive a hop while it rolls out of a split).
    if (request.headers.has(hopTokenHeader) || request.headers.has(hopClientHeader)) {
      const mutable = new Request(request);
      const h = hop(mutable, env);
      if (h.forwarded) return env.TARGET.fetch(mutable, { cf: h.res.cf ?? undefined });
      request = mutable;
    }
    const left = invocationsLeft(request.headers.get(header), Number(env.LOOP_LIMIT));
    if (left <= 0) {
      return new Response("error code: 1019", {
        status: Number(env.LOOP_STATUS),
        headers: { "content-type": "text/plain; charset=UTF-8" },
      });
    }
    const peer = peerAddress(request.cf?.clientIp);
    let res = { clientIp: peer, cf: undefined };
    try {
      res = await requestCf(request, env, peer);
    } catch (e) {
      // Without the sidecar's answer the request still runs, with the peer as client.
      console.error(String(e));
    }
    const headers = new Headers(request.headers);
    headers.set(header, String(left - 1));
    const forwarded = request.headers.get(forwardedFor);
    if (res.clientIp) {
      headers.set(connectingIP, res.clientIp);
      headers.set(forwardedFor, forwarded ? `${forwarded}, ${peer}` : res.clientIp);
    } else {
      // No peer address (not a socket connection): no client address to vouch for.
      headers.delete(connectingIP);
    }
    const out = new Request(request, { headers, cf: res.cf });
    if (env.VERSIONS && pickVersion(request.headers, env.WORKER_NAME, env.VERSIONS) !== env.SELF_VERSION) {
      return forward(out, env, res);
    }
    return env.TARGET.fetch(out);
  },
};
