// The runner worker served on workerd's internal `workflows` socket. The sidecar's
// engine opens one WebSocket per run (GET /run, Upgrade: websocket) and sends the job
// {workflow, id, runId, event} first; the runner calls the user's WorkflowEntrypoint
// (service binding named after the workflow, entrypoint = className) run(event, step)
// with the step object of workflows-step.js, whose step calls go over the same socket
// (Link), and ends with the run's outcome: {outcome: "complete", output} |
// {outcome: "errored", error: {name, message}} | {outcome: "suspended"} |
// {outcome: "aborted"}. Bindings: one service binding per workflow.
import { Link, Step } from "./workflows-step.js";

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") return new Response("ok\n");
    if (url.pathname !== "/run" || request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
      return new Response("not found\n", { status: 404 });
    }
    const [client, server] = Object.values(new WebSocketPair());
    server.accept();
    const link = new Link(server);
    ctx.waitUntil(link.job.then((job) => run(job, link, env)).then((outcome) => link.end(outcome), () => link.end(null)));
    return new Response(null, { status: 101, webSocket: client });
  },
};

async function run(job, link, env) {
  const target = env[job.workflow];
  if (!target || typeof target.run !== "function") {
    return { outcome: "errored", error: { name: "Error", message: `workflows runner: no binding for workflow "${job.workflow}"` } };
  }
  const step = new Step(link, job);
  const event = {
    payload: job.event.payload,
    timestamp: new Date(job.event.timestamp),
    instanceId: job.event.instanceId,
    workflowName: job.event.workflowName,
  };
  // Instances created by a cron firing (CronSchedule workflowRef) carry the expression.
  if (job.event.schedule) event.schedule = job.event.schedule;
  const running = (async () => {
    try {
      const output = await target.run(event, step);
      return { outcome: "complete", output: output === undefined ? null : JSON.parse(JSON.stringify(output)) };
    } catch (e) {
      return { outcome: "errored", error: { name: String(e?.name ?? "Error"), message: String(e?.message ?? e) } };
    }
  })();
  const res = await Promise.race([running, step.stopPromise.then((outcome) => ({ outcome }))]);
  if (step.stopped) return { outcome: step.stopped };
  return res;
}
