// Test Worker for the Durable Object router (durableobjects_test.go): class Counter and
// a front door that reaches it through env.COUNTER (the router binding).
import { DurableObject } from "cloudflare:workers";

export class Counter extends DurableObject {
  async increment(n = 1) {
    const v = ((await this.ctx.storage.get("v")) ?? 0) + n;
    await this.ctx.storage.put("v", v);
    return v;
  }
  async value() {
    return (await this.ctx.storage.get("v")) ?? 0;
  }
  async info() {
    return { id: this.ctx.id.toString(), name: this.ctx.id.name ?? null, value: await this.value(), tags: ["a", "b"], nested: { ok: true } };
  }
  async boom(msg) {
    throw new Error(msg);
  }
  async giveFunction() {
    return () => 1;
  }
  async setAlarmIn(ms) {
    await this.ctx.storage.setAlarm(Date.now() + ms);
    return true;
  }
  async alarm() {
    await this.ctx.storage.put("alarms", ((await this.ctx.storage.get("alarms")) ?? 0) + 1);
  }
  async alarms() {
    return (await this.ctx.storage.get("alarms")) ?? 0;
  }
  async fetch(request) {
    const u = new URL(request.url);
    return Response.json({ name: this.ctx.id.name ?? null, path: u.pathname, header: request.headers.get("x-test"), value: await this.value(), leaked: request.headers.get("x-workerd-operator-do-id") });
  }
}

export default {
  async fetch(request, env) {
    const u = new URL(request.url);
    const q = (k) => u.searchParams.get(k);
    try {
      if (u.pathname === "/id") return new Response(env.COUNTER.idFromName(q("name")).toString());
      const stub = q("id") ? env.COUNTER.get(env.COUNTER.idFromString(q("id"))) : env.COUNTER.getByName(q("name"));
      switch (u.pathname) {
        case "/inc": return Response.json(await stub.increment(Number(q("by") ?? 1)));
        case "/value": return Response.json(await stub.value());
        case "/info": return Response.json(await stub.info());
        case "/boom": return Response.json(await stub.boom(q("msg")));
        case "/fn": return Response.json(await stub.giveFunction());
        case "/passfn": return Response.json(await stub.increment(() => 1));
        case "/alarm": return Response.json(await stub.setAlarmIn(Number(q("ms"))));
        case "/alarms": return Response.json(await stub.alarms());
        case "/fetch": return await stub.fetch("http://do/hello/" + q("name"), { headers: { "x-test": "t1" } });
      }
      return new Response("not found\n", { status: 404 });
    } catch (e) {
      return new Response(String(e && e.message), { status: 500 });
    }
  },
};
