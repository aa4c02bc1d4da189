// The runner worker served on workerd's internal `workflows` socket. The sidecar's
// engine POSTs /run {workflow, id, runId, event} and the runner calls the user's
// WorkflowEntrypoint (service binding named after the workflow, entrypoint = className)
// run(event, step) with the step object of workflows-step.js; the answer is the run's
// outcome: {outcome: "complete", output} | {outcome: "errored", error: {name, message}} |
// {outcome: "suspended"} | {outcome: "aborted"}. Bindings: `__sidecar` (the sidecar) and
// one service binding per workflow.
import { Step } from "./workflows-step.js";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") return new Response("ok\n");
    if (request.method !== "POST" || url.pathname !== "/run") return new Response("not found\n", { status: 404 });
    const job = await request.json();
    const target = env[job.workflow];
    if (!target || typeof target.run !== "function") {
      return Response.json({ outcome: "errored", error: { name: "Error", message: `workflows runner: no binding for workflow "${job.workflow}"` } });
    }
    const step = new Step(env.__sidecar, job);
    const event = {
      payload: job.event.payload,
      timestamp: new Date(job.event.timestamp),
      instanceId: job.event.instanceId,
      workflowName: job.event.workflowName,
    };
    // Instances created by a cron firing (CronSchedule workflowRef) carry the expression.
    if (job.event.schedule) event.schedule = job.event.schedule;
    const run = (async () => {
      try {
        const output = await target.run(event, step);
        return { outcome: "complete", output: output === undefined ? null : JSON.parse(JSON.stringify(output)) };
      } catch (e) {
        return { outcome: "errored", error: { name: String(e?.name ?? "Error"), message: String(e?.message ?? e) } };
      }
    })();
    const res = await Promise.race([run, step.stopPromise.then((outcome) => ({ outcome }))]);
    if (step.stopped) return Response.json({ outcome: step.stopped });
    return Response.json(res);
  },
};
