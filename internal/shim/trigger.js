// trigger.js: the worker behind workerd's `trigger` socket (docs/pod-contract.md).
// Needs compatibility flag service_binding_extra_handlers (and workerd --experimental);
// env.TARGET is a service binding to the user's Worker.
//   POST /scheduled {"cron":"<expr>","scheduledTime":<ms>} -> 200 {"outcome","noRetry"}
//                                                          -> 400 {"error"} if malformed
//   GET /cdn-cgi/local/scheduled?cron=<expr>&time=<ms>[&format=json]
//       (also /cdn-cgi/handler/scheduled) -> 200 "ok" | 500 "<outcome>" | the JSON above
function json(status, value) {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "content-type": "application/json" },
  });
}

async function run(env, cron, ms) {
  const result = await env.TARGET.scheduled({ cron, scheduledTime: new Date(ms) });
  return {
    outcome: result && typeof result.outcome === "string" ? result.outcome : "exception",
    noRetry: !!(result && result.noRetry),
  };
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/scheduled") {
      if (request.method !== "POST") {
        return json(405, { error: "POST /scheduled only" });
      }
      let body;
      try {
        body = await request.json();
      } catch (e) {
        return json(400, { error: `body is not JSON: ${e.message}` });
      }
      if (body === null || typeof body !== "object" || Array.isArray(body)) {
        return json(400, { error: "body must be an object {\"cron\":string,\"scheduledTime\":number}" });
      }
      if (typeof body.cron !== "string") {
        return json(400, { error: "cron must be a string" });
      }
      if (typeof body.scheduledTime !== "number" || !Number.isFinite(body.scheduledTime)) {
        return json(400, { error: "scheduledTime must be a number (ms since epoch)" });
      }
      return json(200, await run(env, body.cron, body.scheduledTime));
    }
    if (url.pathname === "/cdn-cgi/local/scheduled" || url.pathname === "/cdn-cgi/handler/scheduled") {
      const cron = url.searchParams.get("cron") ?? "";
      const time = url.searchParams.get("time");
      let ms = Date.now();
      if (time !== null && time !== "") {
        ms = Number(time);
        if (!Number.isFinite(ms)) {
          return json(400, { error: "time must be a number (ms since epoch)" });
        }
      }
      const result = await run(env, cron, ms);
      if (url.searchParams.get("format") === "json") {
        return json(200, result);
      }
      return result.outcome === "ok"
        ? new Response("ok")
        : new Response(result.outcome, { status: 500 });
    }
    return json(404, { error: "not found: POST /scheduled or GET /cdn-cgi/local/scheduled" });
  },
};
