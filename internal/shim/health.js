// health.js: the worker behind workerd's `health` socket (docs/pod-contract.md).
//   GET /healthz -> 200 "ok"     liveness: answered inside the workerd process
//   GET /readyz  -> 200 "ready"  readiness: also asks the sidecar's GET /healthz;
//                   503 "not ready: sidecar ..." when the sidecar is down or unhealthy
//                   On a D1Database's host (env.DATA bound) also its migrations:
//                   503 "not ready: ..." until they are applied (datahost.js).
//   GET /_workerd-operator/drain -> on a Durable Object shard pod (env.GATEWAY bound), the
//                   gateway worker's drain (gateway.js), the pod's preStop hook: the
//                   kubelet cannot present the client certificate the gateway socket
//                   requires under internal TLS. Only with header DRAIN_TOKEN_HEADER
//                   equal to env.DRAIN_TOKEN (the hook sends it), else 403. 404 on other pods.
// env.SIDECAR is the `external` service "sidecar" ($(POD_IP):9092 by flag); env.GATEWAY
// the gateway worker of a shard pod (in-process).
const DRAIN_PATH = "/_workerd-operator/drain";
const READY_PATH = "/_workerd-operator/ready";
const DRAIN_TOKEN_HEADER = "x-workerd-operator-drain-token";

// sameToken compares in time independent of where the strings differ.
function sameToken(got, want) {
  if (!want || typeof got !== "string" || got.length !== want.length) return false;
  let diff = 0;
  for (let i = 0; i < want.length; i++) diff |= got.charCodeAt(i) ^ want.charCodeAt(i);
  return diff === 0;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response("method not allowed\n", { status: 405 });
    }
    switch (url.pathname) {
      case "/healthz":
        return new Response("ok\n");
      case "/readyz": {
        let res;
        try {
          res = await env.SIDECAR.fetch("http://sidecar/healthz");
        } catch (e) {
          return new Response(`not ready: sidecar unreachable: ${e && e.message ? e.message : e}\n`, { status: 503 });
        }
        const body = await res.text();
        if (res.status < 200 || res.status > 299) {
          return new Response(`not ready: sidecar /healthz answered ${res.status}: ${body.slice(0, 200)}\n`, { status: 503 });
        }
        if (env.DATA) {
          const data = await env.DATA.fetch("http://data" + READY_PATH).catch((e) => new Response(String(e && e.message ? e.message : e), { status: 503 }));
          if (data.status !== 200) {
            return new Response(`not ready: ${(await data.text()).slice(0, 500)}\n`, { status: 503 });
          }
        }
        return new Response("ready\n");
      }
      case DRAIN_PATH:
        if (request.method !== "GET" || url.search !== "" || !env.GATEWAY) break;
        if (!sameToken(request.headers.get(DRAIN_TOKEN_HEADER), env.DRAIN_TOKEN)) {
          return new Response("forbidden: the drain needs the pod's drain token\n", { status: 403 });
        }
        // A fresh request: nothing of the caller's (headers, body) reaches the gateway.
        return env.GATEWAY.fetch("http://gateway" + DRAIN_PATH);
      default:
        break;
    }
    return new Response("not found\n", { status: 404 });
  },
};
