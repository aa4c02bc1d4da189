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
const header = "CF-EW-Via";
const connectingIP = "CF-Connecting-IP";
const forwardedFor = "X-Forwarded-For";
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

export default {
  async fetch(request, env) {
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
    return env.TARGET.fetch(new Request(request, { headers, cf: res.cf }));
  },
};
