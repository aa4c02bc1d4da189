// Test workflows for internal/sidecar/workflows (issue 6 "Done means" 1-8).
import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

async function bump(env, key) {
  const r = await env.COUNTER.fetch("http://counter/inc?key=" + encodeURIComponent(key), { method: "POST" });
  return (await r.json()).count;
}

// 1: do -> sleep 2 s -> waitForEvent -> do.
export class Basic extends WorkflowEntrypoint {
  async run(event, step) {
    const a = await step.do("first", async () => ({ n: event.payload.n + 1 }));
    await step.sleep("nap", "2 seconds");
    const ev = await step.waitForEvent("approval", { type: "approve", timeout: "1 hour" });
    const b = await step.do("second", async () => ({ total: a.n + ev.payload.add }));
    return { a, b, by: ev.payload.by };
  }
}

// 2, 3: a step that fails per event.payload.mode.
export class Retry extends WorkflowEntrypoint {
  async run(event, step) {
    const p = event.payload;
    return await step.do("flaky", p.config, async (ctx) => {
      if (p.mode === "nonretryable") throw new NonRetryableError("");
      if (p.mode === "slow-first") {
        if (ctx.attempt === 1) await scheduler.wait(p.slowMs);
        return { attempt: ctx.attempt };
      }
      throw new Error("always fails, attempt " + ctx.attempt);
    });
  }
}

// 4: events.
export class Events extends WorkflowEntrypoint {
  async run(event, step) {
    const got = [];
    if (event.payload.mode === "buffered") {
      await step.waitForEvent("start", { type: "start" });
      for (let i = 1; i <= 3; i++) {
        const e = await step.waitForEvent("approval " + i, { type: "approve" });
        got.push(e.payload);
      }
    } else {
      try {
        await step.waitForEvent("early", { type: "late", timeout: "1 second" });
        got.push("early got an event");
      } catch (e) {
        got.push(e.name);
      }
      const e = await step.waitForEvent("later", { type: "late", timeout: "1 hour" });
      got.push(e.payload);
    }
    return got;
  }
}

// 5: a slow step with a side effect, then a quick one.
export class Pausable extends WorkflowEntrypoint {
  async run(event, step) {
    const id = event.instanceId;
    const slow = await step.do("slow", async () => {
      const n = await bump(this.env, id + ":slow");
      await scheduler.wait(event.payload.slowMs);
      return n;
    });
    const quick = await step.do("quick", async () => bump(this.env, id + ":quick"));
    return { slow, quick };
  }
}

// 6: shapes under limits.steps: 2.
export class Limited extends WorkflowEntrypoint {
  async run(event, step) {
    const out = [];
    for (const s of event.payload.shape) {
      if (s === "do") out.push(await step.do("step " + out.length, async () => out.length));
      else await step.sleep("nap " + out.length, "1 second");
    }
    return out;
  }
}

// 7: many steps with external side effects.
export class Counted extends WorkflowEntrypoint {
  async run(event, step) {
    const out = [];
    for (let i = 0; i < event.payload.steps; i++) {
      out.push(await step.do("s" + i, async () => bump(this.env, event.instanceId + ":s" + i)));
    }
    return out;
  }
}

// 8: do, long sleep, do.
export class Sleepy extends WorkflowEntrypoint {
  async run(event, step) {
    await step.do("a", async () => 1);
    await step.sleep("nap", "30 seconds");
    return await step.do("b", async () => 2);
  }
}

// Benchmark: M steps, each returning the time it ran.
export class Bench extends WorkflowEntrypoint {
  async run(event, step) {
    const out = [];
    for (let i = 0; i < event.payload.steps; i++) out.push(await step.do("s" + i, async () => Date.now()));
    return out;
  }
}

// The test drives bindings through this fetch handler: POST /<BINDING>/<op> with JSON.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const [, binding, op] = url.pathname.split("/");
    const wf = env[binding];
    if (!wf) return new Response("no binding " + binding, { status: 404 });
    const body = request.method === "POST" ? await request.json() : {};
    try {
      switch (op) {
        case "create": { const i = await wf.create(body); return Response.json({ id: i.id }); }
        case "createBatch": { const r = await wf.createBatch(body); return Response.json({ created: r.created.map((i) => i.id), errors: r.errors }); }
        case "status": return Response.json(await (await wf.get(body.id)).status());
        case "sendEvent": { const i = await wf.get(body.id); await i.sendEvent({ type: body.type, payload: body.payload }); return Response.json({ ok: true }); }
        case "pause": case "resume": case "terminate": case "restart": {
          const i = await wf.get(body.id); await i[op](); return Response.json({ ok: true });
        }
      }
      return new Response("unknown op " + op, { status: 404 });
    } catch (e) {
      return Response.json({ error: { name: e.name, code: e.code, message: e.message } }, { status: 400 });
    }
  },
};
