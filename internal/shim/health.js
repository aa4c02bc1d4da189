// health.js: the worker behind workerd's `health` socket (docs/pod-contract.md).
//   GET /healthz -> 200 "ok"     liveness: answered inside the workerd process
//   GET /readyz  -> 200 "ready"  readiness: also asks the sidecar's GET /healthz;
//                   503 "not ready: sidecar ..." when the sidecar is down or unhealthy
// env.SIDECAR is the `external` service "sidecar" ($(POD_IP):9092 by flag).
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
        return new Response("ready\n");
      }
      default:
        return new Response("not found\n", { status: 404 });
    }
  },
};
