// Test workflows for the engine in internal/workflows.
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
        await step.waitForEvent("early", { type: "late", timeout: event.payload.earlyTimeout ?? "1 second" });
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

// A step whose first two runs fail as a call does while the pod behind it is replaced
// ("Network connection lost."); with no retries left it still completes.
export class Infra extends WorkflowEntrypoint {
  async run(event, step) {
    return await step.do("through a rollout", { retries: { limit: 0, delay: 0 } }, async (ctx) => {
      const n = await bump(this.env, event.instanceId + ":runs");
      if (n <= 2) throw new Error("Network connection lost.");
      return { runs: n, attempt: ctx.attempt };
    });
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

// Concurrent steps: event.payload.n step.do calls at once (Promise.all), step i bumping
// its counter and then taking slowMs + i * staggerMs; then one more step.
export class Parallel extends WorkflowEntrypoint {
  async run(event, step) {
    const { n, slowMs, staggerMs } = event.payload;
    const id = event.instanceId;
    const got = await Promise.all(Array.from({ length: n }, (_, i) => step.do("p" + i, async () => {
      const c = await bump(this.env, id + ":p" + i);
      await scheduler.wait(slowMs + i * staggerMs);
      return c;
    })));
    const after = await step.do("after", async () => bump(this.env, id + ":after"));
    return { got, after };
  }
}

// Step configs and names: one step.do with event.payload's name and config (a function
// delay when payload.delayFn); the outcome or the error is the output, or the error
// ends the instance when payload.rethrow.
export class Configs extends WorkflowEntrypoint {
  async run(event, step) {
    const p = event.payload;
    const config = p.config === undefined ? {} : p.config;
    if (p.delayFn) config.retries = { ...config.retries, delay: () => 10 };
    try {
      const v = await step.do(p.name, config, async (ctx) => {
        const ran = await bump(this.env, event.instanceId + ":ran");
        if (p.returns === "config") return ctx.config;
        if (p.returns === "function") return { ran, f: () => 1 };
        if (p.returns === "symbol") return Symbol("s");
        return ran;
      });
      return { ok: v };
    } catch (e) {
      if (p.rethrow) throw e;
      return { name: e.name, message: e.message };
    }
  }
}

// A delay function: the step fails every attempt; the function answers 1000 (ms),
// "2 seconds", 3000 for attempts 1 to 3 (constant backoff), after checking what it is
// given; payload.throwing makes it throw instead.
export class DelayFn extends WorkflowEntrypoint {
  async run(event, step) {
    const delay = ({ ctx, error }) => {
      if (event.payload.throwing) throw new Error("no delay for you");
      if (ctx.step.name !== "flaky" || !String(error?.message).includes("boom " + ctx.attempt)) return "not a delay";
      return [1000, "2 seconds", 3000][ctx.attempt - 1];
    };
    return await step.do("flaky", { retries: { limit: 3, delay, backoff: "constant" } }, async (ctx) => {
      throw new Error("boom " + ctx.attempt);
    });
  }
}

// waitForEvent with a 500 ms timeout and no event: the timeout error is the output.
export class ShortWait extends WorkflowEntrypoint {
  async run(event, step) {
    try {
      await step.waitForEvent("short", { type: "never", timeout: 500 });
      return "got an event";
    } catch (e) {
      return e.name;
    }
  }
}

// What run() sees of the engine's errors (builtin_test.go), per event.payload.case: a
// timed-out waitForEvent or step, an empty step name, a result that cannot be
// serialised; the error caught, as {name, message, code}, is the output.
export class Shapes extends WorkflowEntrypoint {
  async run(event, step) {
    const cases = {
      wait: () => step.waitForEvent("w", { type: "never", timeout: 200 }),
      step: () => step.do("slow", { timeout: 200, retries: { limit: 0, delay: 0 } }, async () => { await scheduler.wait(1500); }),
      emptyName: () => step.do("", async () => 1),
      unserialisable: () => step.do("fn", async () => ({ f: () => 1 })),
    };
    try {
      return { returned: await cases[event.payload.case]() };
    } catch (e) {
      return { name: e.name, message: e.message, code: e.code ?? null };
    }
  }
}

// The test drives bindings through this fetch handler: POST /<BINDING>/<op> with JSON.
// Oversized step results and error messages (caps_test.go).
export class Big extends WorkflowEntrypoint {
  async run(event, step) {
    const p = event.payload;
    return await step.do("big", { retries: { limit: 0, delay: 0 } }, async () => {
      if (p.mode === "throw") throw new Error("e".repeat(p.chars));
      return "r".repeat(p.chars);
    });
  }
}

// A step result and params near 1 MiB, the step replayed after a sleep: the job and
// the engine's answers reach the runner in parts (caps_test.go).
export class BigReplay extends WorkflowEntrypoint {
  async run(event, step) {
    const r = await step.do("big", async () => "r".repeat(event.payload.chars));
    await step.sleep("nap", 1);
    return { result: r.length, pad: event.payload.pad.length, euros: event.payload.pad === "€".repeat(event.payload.pad.length) };
  }
}

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
