// Test stand-in for internal/shim/trigger.js: POST /scheduled {cron, scheduledTime}
// -> env.TARGET.scheduled(...) -> {"outcome","noRetry"}; GET /calls -> the user
// worker's call log.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/scheduled" && request.method === "POST") {
      const body = await request.json();
      const result = await env.TARGET.scheduled({
        cron: body.cron,
        scheduledTime: new Date(body.scheduledTime),
      });
      return Response.json({ outcome: result.outcome, noRetry: result.noRetry });
    }
    if (url.pathname === "/calls") {
      return env.TARGET.fetch("http://user/calls");
    }
    return new Response("not found", { status: 404 });
  },
};
