// Test worker for internal/sidecar/channels: a Durable Object (Obj) that drives the durable
// channels client (env.CHANNELS, internal/shim/channels.js) one operation per request, and
// the contract's composite example (Conn: /connect SSE, /dispatch, /chunk).
//   POST /o/<object name>/<op>   JSON body → JSON result, or {"error":{...}} (caught in the DO)
//   GET  /c/<object name>/connect?heartbeatMs=N, POST /c/<name>/dispatch, POST /c/<name>/chunk
//   POST /outside/<op>           the client used outside a Durable Object
import { DurableObject } from "cloudflare:workers";

function errJSON(e) {
  return {
    error: {
      name: e && e.name,
      code: e && e.code,
      message: e && e.message,
      limit: e && e.limit,
      source: e && e.source,
      isError: e instanceof Error,
    },
  };
}

export class Obj extends DurableObject {
  async fetch(request) {
    const url = new URL(request.url);
    const op = url.pathname.split("/")[3];
    if (op === "stream") return this.stream(url.searchParams.get("channel"), url.searchParams.has("iterate"));
    if (op === "socket") return this.socket(url.searchParams.get("channel"));
    if (op === "publisher") return this.publisher(url.searchParams.get("channel"));
    const b = request.method === "POST" ? await request.json() : {};
    try {
      return Response.json(await this.run(op, b));
    } catch (e) {
      return Response.json(errJSON(e));
    }
  }

  // stream: a new subscription to channel, its messages as server-sent events
  // ("data: <message>"), ": hb" on each 1 s wait timeout, "event: end" when it ends.
  // With iterate, read through ch.messages (one sidecar stream) instead of wait.
  async stream(channel, iterate) {
    const ch = this.env.CHANNELS.open(this.ctx);
    const handle = await ch.subscribe(channel);
    const { readable, writable } = new TransformStream();
    const w = writable.getWriter();
    const enc = new TextEncoder();
    this.ctx.waitUntil((async () => {
      try {
        await w.write(enc.encode(": subscribed\n\n"));
        const it = iterate ? ch.messages(handle, 1000) : null;
        for (;;) {
          const r = it ? (await it.next()).value : await ch.wait(handle, 1000);
          if (r.outcome === "message") await w.write(enc.encode(`data: ${r.message}\n\n`));
          else if (r.outcome === "timeout") await w.write(enc.encode(": hb\n\n"));
          else {
            await w.write(enc.encode(`event: end\ndata: ${r.outcome}: ${r.reason}\n\n`));
            break;
          }
        }
        await w.close();
      } catch (e) {
        try {
          await w.write(enc.encode(`event: end\ndata: error: ${e && e.code}\n\n`));
          await w.close();
        } catch {}
      } finally {
        try { await ch.unsubscribe(handle); } catch {}
      }
    })());
    return new Response(readable, { headers: { "content-type": "text/event-stream" } });
  }

  // socket: a new subscription to channel, its messages as WebSocket text messages (read
  // through ch.messages), ": subscribed" first; the socket closes with code 1000 and the
  // outcome as its reason when the subscription ends.
  async socket(channel) {
    const ch = this.env.CHANNELS.open(this.ctx);
    const handle = await ch.subscribe(channel);
    const [client, server] = Object.values(new WebSocketPair());
    server.accept();
    this.ctx.waitUntil((async () => {
      try {
        server.send(": subscribed");
        for await (const r of ch.messages(handle, 1000)) {
          if (r.outcome === "message") server.send(r.message);
          else if (r.outcome !== "timeout") {
            server.close(1000, `${r.outcome}: ${r.reason}`);
            return;
          }
        }
      } catch (e) {
        server.close(1011, String(e && e.code));
      } finally {
        try { await ch.unsubscribe(handle); } catch {}
      }
    })());
    return new Response(null, { status: 101, webSocket: client });
  }

  // publisher: a WebSocket whose every text message is published on channel, answered
  // by the number of subscribers reached (or the error's code), in order.
  publisher(channel) {
    const ch = this.env.CHANNELS.open(this.ctx);
    const [client, server] = Object.values(new WebSocketPair());
    server.accept();
    let last = Promise.resolve();
    server.addEventListener("message", (ev) => {
      const p = ch.publish(channel, ev.data);
      last = last.then(() => p).then((n) => server.send(String(n)), (e) => server.send(String(e && e.code)));
    });
    return new Response(null, { status: 101, webSocket: client });
  }

  async run(op, b) {
    const ch = this.env.CHANNELS.open(this.ctx);
    switch (op) {
      case "subscribe":
        return { handle: await ch.subscribe(b.channel) };
      case "publish":
        return { reached: await ch.publish(b.channel, b.message) };
      case "publishMany": {
        const reached = [];
        for (let i = 0; i < b.count; i++) reached.push(await ch.publish(b.channel, `${b.prefix}${i}`));
        return { reached };
      }
      case "wait": {
        const t0 = Date.now();
        const r = await ch.wait(b.handle, b.timeoutMs);
        return { ...r, elapsedMs: Date.now() - t0 };
      }
      case "collect": {
        const messages = [];
        let end = null;
        while (messages.length < b.count) {
          const r = await ch.wait(b.handle, b.timeoutMs);
          if (r.outcome !== "message") {
            end = r;
            break;
          }
          messages.push(r.message);
        }
        return { messages, end };
      }
      case "collectThroughTimeouts": {
        // Wait with a short timeout until count messages arrived, counting the timeouts.
        const messages = [];
        let timeouts = 0;
        while (messages.length < b.count) {
          const r = await ch.wait(b.handle, b.timeoutMs);
          if (r.outcome === "timeout") timeouts++;
          else if (r.outcome === "message") messages.push(r.message);
          else return { messages, timeouts, end: r };
        }
        return { messages, timeouts, end: null };
      }
      case "leaveEarly": {
        // A messages() loop that is not pulled while count messages are published one by
        // one (their lines arrive meanwhile), then takes one and leaves: wait gets the rest.
        const handle = await ch.subscribe(b.channel);
        const it = ch.messages(handle, 60000);
        const first = (await it.next()).value;
        for (let i = 0; i < b.count; i++) await ch.publish(b.channel, `m${i}`);
        await new Promise((r) => setTimeout(r, b.settleMs));
        const taken = (await it.next()).value;
        await it.return();
        const rest = [];
        for (let r = await ch.wait(handle, 0); r.outcome === "message"; r = await ch.wait(handle, 0)) rest.push(r.message);
        return { first, taken, rest };
      }
      case "publishTogether": {
        // Publishes sent at once, each settled on its own: reached or the error's code.
        const settled = await Promise.allSettled(b.messages.map((m) => ch.publish(b.channel, m)));
        return { results: settled.map((x) => (x.status === "fulfilled" ? x.value : x.reason.code)) };
      }
      case "slowLoop": {
        // A messages() loop that is not pulled while count messages of size bytes are
        // published, then drained: the outcomes it gives until it ends or heartbeats.
        const handle = await ch.subscribe(b.channel);
        const it = ch.messages(handle, 1000);
        await it.next();
        for (let i = 0; i < b.count; i++) await ch.publish(b.channel, String(i % 10).repeat(b.size));
        await new Promise((r) => setTimeout(r, b.settleMs));
        let messages = 0;
        for (;;) {
          const r = (await it.next()).value;
          if (r.outcome === "message") messages++;
          else return { messages, end: r };
        }
      }
      case "restartLoops": {
        // count messages published while a messages() loop reads them, leaving the loop
        // every `every` messages and starting a new one at once; ends at the first
        // heartbeat after the publisher finished.
        const handle = await ch.subscribe(b.channel);
        let published = false;
        const pub = (async () => {
          for (let i = 0; i < b.count; i++) await ch.publish(b.channel, `m${i}`);
          published = true;
        })();
        const got = [];
        let loops = 0;
        for (let done = false; !done; loops++) {
          for await (const r of ch.messages(handle, b.heartbeatMs)) {
            if (r.outcome === "timeout" && published) {
              done = true;
              break;
            }
            if (r.outcome !== "message") continue;
            got.push(r.message);
            if (got.length % b.every === 0) break;
          }
        }
        await pub;
        return { got, loops };
      }
      case "unsubscribe":
        return { unsubscribed: await ch.unsubscribe(b.handle) };
      case "close":
        return { notified: await ch.close(b.channel, b.reason) };
      case "count":
        return { subscribers: await ch.subscriberCount(b.channel) };
      case "produce": {
        // Write the item to state, then publish it (the contract's subscribe-then-read window).
        for (let i = b.from; i < b.from + b.count; i++) {
          const items = (await this.ctx.storage.get("items")) || [];
          items.push(String(i));
          await this.ctx.storage.put("items", items);
          await ch.publish(b.channel, String(i));
        }
        return { done: true };
      }
      case "snapshotThenWait": {
        // Subscribe, then read state, then wait: dedupe what the snapshot already holds.
        const handle = await ch.subscribe(b.channel);
        if (b.signalChannel) await ch.publish(b.signalChannel, "subscribed");
        const snapshot = (await this.ctx.storage.get("items")) || [];
        const seen = new Set(snapshot);
        const received = [];
        let deduped = 0;
        while (seen.size < b.total) {
          const r = await ch.wait(handle, b.timeoutMs);
          if (r.outcome !== "message") return { snapshot, received, deduped, end: r };
          received.push(r.message);
          if (seen.has(r.message)) deduped++;
          seen.add(r.message);
        }
        await ch.unsubscribe(handle);
        return { snapshot, received, deduped, end: null };
      }
      default:
        throw new Error(`unknown op ${op}`);
    }
  }
}

// Conn: the contract's composite example (a provider connection). GET /connect streams
// server-sent events: "event: message" per channel message, ": heartbeat" comments on each
// wait timeout, and "event: end" with the reason when the connection is replaced by a newer
// /connect (which closes the channel with that reason). POST /dispatch and /chunk publish.
export class Conn extends DurableObject {
  async fetch(request) {
    const url = new URL(request.url);
    const op = url.pathname.split("/")[3];
    const ch = this.env.CHANNELS.open(this.ctx);
    try {
      if (op === "connect") {
        const hb = Number(url.searchParams.get("heartbeatMs") || "1000");
        const n = (this.connections = (this.connections || 0) + 1);
        await ch.close("conn", `replaced by a newer /connect (#${n})`);
        const handle = await ch.subscribe("conn");
        const { readable, writable } = new TransformStream();
        const w = writable.getWriter();
        const enc = new TextEncoder();
        const pump = async () => {
          try {
            await w.write(enc.encode(`event: open\ndata: ${n}\n\n`));
            for (;;) {
              const r = await ch.wait(handle, hb);
              if (r.outcome === "message") {
                await w.write(enc.encode(`event: message\ndata: ${r.message}\n\n`));
              } else if (r.outcome === "timeout") {
                await w.write(enc.encode(`: heartbeat\n\n`));
              } else {
                await w.write(enc.encode(`event: end\ndata: ${r.outcome}: ${r.reason}\n\n`));
                break;
              }
            }
            await w.close();
          } catch (e) {
            try { await w.abort(e); } catch {}
          } finally {
            try { await ch.unsubscribe(handle); } catch {}
          }
        };
        this.ctx.waitUntil(pump());
        return new Response(readable, { headers: { "content-type": "text/event-stream", "cache-control": "no-store" } });
      }
      if (op === "dispatch" || op === "chunk") {
        const body = await request.text();
        const reached = await ch.publish("conn", JSON.stringify({ type: op, body }));
        return Response.json({ reached });
      }
      return new Response("not found", { status: 404 });
    } catch (e) {
      return Response.json(errJSON(e), { status: 500 });
    }
  }
}

export default {
  async fetch(request, env, ctx) {
    const parts = new URL(request.url).pathname.split("/");
    if (parts[1] === "outside") {
      const out = {};
      try {
        env.CHANNELS.open(ctx);
        out.open = { ok: true };
      } catch (e) {
        out.open = errJSON(e);
      }
      try {
        await env.CHANNELS.subscribe("x");
        out.subscribe = { ok: true };
      } catch (e) {
        out.subscribe = errJSON(e);
      }
      return Response.json(out);
    }
    const ns = parts[1] === "c" ? env.CONN : env.OBJ; // "/o/..." and "/s/..." go to Obj
    return ns.get(ns.idFromName(parts[2])).fetch(request);
  },
};
