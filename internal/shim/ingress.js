// ingress.js: the worker behind workerd's `http` socket, in front of the Worker's http
// service (env.TARGET: the user's Worker, or the assets service in front of it).
// It keeps Cloudflare's loop limit
// (https://developers.cloudflare.com/workers/observability/errors/#loop-limit): the
// CF-EW-Via header holds how many Worker invocations are left; each invocation takes
// one, and a request arriving with none left is answered with error 1019 without
// invoking the Worker. A request without the header (or with a value that is not a
// count, or above the limit) starts at the limit, so a client cannot lengthen a chain.
// A Worker that forwards its request (fetch(request)) carries the decremented count on.
//   env.LOOP_LIMIT   invocations a chain may make (internal/limits loop_invocations)
//   env.LOOP_STATUS  the HTTP status of the 1019 answer (docs/pod-contract.md "Loop limit")
const header = "CF-EW-Via";

// invocationsLeft reads the header's count: the limit when absent, malformed or above it.
export function invocationsLeft(value, limit) {
  if (value === null || !/^[0-9]{1,6}$/.test(value.trim())) return limit;
  return Math.min(Number(value.trim()), limit);
}

export default {
  fetch(request, env) {
    const left = invocationsLeft(request.headers.get(header), Number(env.LOOP_LIMIT));
    if (left <= 0) {
      return new Response("error code: 1019", {
        status: Number(env.LOOP_STATUS),
        headers: { "content-type": "text/plain; charset=UTF-8" },
      });
    }
    const headers = new Headers(request.headers);
    headers.set(header, String(left - 1));
    return env.TARGET.fetch(new Request(request, { headers }));
  },
};
