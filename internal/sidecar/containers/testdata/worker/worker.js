// A Durable Object that drives ctx.container directly, the calls @cloudflare/containers
// makes: start (env, entrypoint, enableInternet), monitor, getTcpPort().fetch,
// signal(15), destroy. Every answer is JSON with the object's id.
import { DurableObject } from "cloudflare:workers";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Box extends DurableObject {
  async fetch(req) {
    const u = new URL(req.url);
    const c = this.ctx.container;
    const out = { id: this.ctx.id.toString() };
    try {
      switch (u.pathname) {
        case "/start":
          if (!c.running) {
            c.start({
              env: { MESSAGE: u.searchParams.get("message") },
              entrypoint: ["/server", "--from-entrypoint"],
              enableInternet: u.searchParams.get("net") === "1",
            });
            this.exit = c.monitor().then(() => "exit 0", (e) => "rejected: " + e.message);
          }
          for (let i = 0; i < 50 && out.fetch === undefined; i++) {
            try {
              out.fetch = await (await c.getTcpPort(8080).fetch("http://ping/")).text();
            } catch (e) {
              out.err = e.message;
              await sleep(200);
            }
          }
          break;
        case "/closed":
          try {
            await c.getTcpPort(9999).fetch("http://ping/");
            out.fetch = "unexpected answer";
          } catch (e) {
            out.err = e.message;
          }
          break;
        case "/signal":
          c.signal(15);
          out.monitor = await Promise.race([this.exit, sleep(15000).then(() => "no exit within 15 s")]);
          break;
        case "/destroy":
          await c.destroy();
          out.destroyed = true;
          break;
      }
    } catch (e) {
      out.error = String(e.stack || e);
    }
    out.running = c.running;
    return Response.json(out);
  }
}

export default {
  async fetch(req, env) {
    return env.BOX.get(env.BOX.idFromName("a")).fetch(req);
  },
};
