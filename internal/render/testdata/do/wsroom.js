// A chat room Durable Object holding WebSockets (fixture of the WebSocket tests,
// docs/durable-objects.md "WebSockets"). GET /room/<name>?user=<u>[&mode=plain]
// upgrades to a WebSocket on room <name>:
//   mode hibernate (default): ctx.acceptWebSocket(ws, ["user:<u>"]) with an attachment
//     {user, joined}; the object may be evicted while the socket stays open.
//   mode plain: ws.accept() with event listeners (the object stays in memory).
// Messages (text):
//   "echo:<x>"   -> "<x>"
//   "bcast:<x>"  -> every socket of the room gets {"seq":n,"from":user,"text":x};
//                   seq counts the room's broadcasts in storage.
//   "info"       -> {"constructions":n,"attachment":…,"sockets":n,"tagged":n,
//                    "autoResponseAt":ms|null,"seq":n}
//   "ping"       -> "pong", answered by workerd without waking the object
//                   (setWebSocketAutoResponse).
//   "close:<code>:<reason>" -> the object closes the socket with that code.
//   "attach:<n>" -> serializeAttachment of about n bytes: "attached" or "refused: …".
//   "timeout:<ms>" -> setHibernatableWebSocketEventTimeout(ms), answers the getter.
//   "lastclose"  -> the {code, reason} its webSocketClose handler last stored.
//   "bounds"     -> each Hibernation API bound tried at and past its limit (bounds()).
//   "log:<x>"    -> console.log("ws log <x>"), answers "logged"; the webSocketClose
//                   handler logs "ws close <code> <reason>" the same way.
// GET /tcp?name=<room>&say=<x> -> stub.connect() to the room (its connect() handler
// answers "<room>:<x>").
// constructions counts constructor runs of this object (stored), so a test can see an
// eviction and rebuild.
import { DurableObject } from "cloudflare:workers";

export class Room extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
    ctx.blockConcurrencyWhile(async () => {
      this.constructions = ((await ctx.storage.get("constructions")) ?? 0) + 1;
      this.constructedAt = Date.now();
      await ctx.storage.put("constructions", this.constructions);
    });
  }

  async fetch(req) {
    const url = new URL(req.url);
    if (url.pathname.endsWith("/constructions")) return Response.json(this.constructions);
    if (req.headers.get("Upgrade") !== "websocket") return new Response("want a WebSocket upgrade\n", { status: 426 });
    const user = url.searchParams.get("user") ?? "anon";
    const [client, server] = Object.values(new WebSocketPair());
    if (url.searchParams.get("mode") === "plain") {
      server.accept();
      server.addEventListener("message", (ev) => this.onMessage(server, ev.data, user));
    } else {
      this.ctx.acceptWebSocket(server, ["user:" + user, "all"]);
      server.serializeAttachment({ user, joined: this.constructions });
    }
    return new Response(null, { status: 101, webSocket: client });
  }

  async webSocketMessage(ws, msg) {
    return this.onMessage(ws, msg, ws.deserializeAttachment()?.user);
  }

  async onMessage(ws, msg, user) {
    msg = typeof msg === "string" ? msg : new TextDecoder().decode(msg);
    if (msg.startsWith("echo:")) return ws.send(msg.slice(5));
    if (msg.startsWith("close:")) {
      const [, code, reason] = msg.split(":");
      return ws.close(Number(code), reason);
    }
    if (msg.startsWith("bcast:")) {
      const seq = ((await this.ctx.storage.get("seq")) ?? 0) + 1;
      await this.ctx.storage.put("seq", seq);
      const out = JSON.stringify({ seq, from: user, text: msg.slice(6) });
      for (const s of this.ctx.getWebSockets()) s.send(out);
      return;
    }
    if (msg.startsWith("attach:")) {
      // serializeAttachment of a value whose serialized form is about n bytes.
      try {
        ws.serializeAttachment({ user, pad: "x".repeat(Number(msg.slice(7))) });
        return ws.send("attached");
      } catch (e) {
        ws.serializeAttachment({ user });
        return ws.send("refused: " + e.message);
      }
    }
    if (msg.startsWith("timeout:")) {
      this.ctx.setHibernatableWebSocketEventTimeout(Number(msg.slice(8)));
      return ws.send(String(this.ctx.getHibernatableWebSocketEventTimeout()));
    }
    if (msg === "bounds") return ws.send(JSON.stringify(this.bounds()));
    if (msg.startsWith("log:")) {
      console.log("ws log " + msg.slice(4));
      return ws.send("logged");
    }
    if (msg === "lastclose") return ws.send(JSON.stringify((await this.ctx.storage.get("lastClose")) ?? null));
    if (msg === "info") {
      ws.send(JSON.stringify({
        constructions: this.constructions,
        constructedAt: this.constructedAt,
        attachment: ws.deserializeAttachment(),
        sockets: this.ctx.getWebSockets().length,
        tagged: user ? this.ctx.getWebSockets("user:" + user).length : 0,
        autoResponseAt: this.ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? null,
        seq: (await this.ctx.storage.get("seq")) ?? 0,
      }));
      return;
    }
    ws.send("unknown:" + msg);
  }

  // bounds tries each Hibernation API bound at its limit and one past it: the answer
  // maps "<what> <n>" to "ok" or the error message. The sockets it accepts stay in
  // getWebSockets() (their other ends are dropped): ask a room used for nothing else.
  bounds() {
    const out = {};
    const attempt = (what, f) => {
      try { f(); out[what] = "ok"; } catch (e) { out[what] = e.message; }
    };
    const spare = () => new WebSocketPair()[1];
    for (const n of [10, 11]) attempt(`tags ${n}`, () => this.ctx.acceptWebSocket(spare(), Array.from({ length: n }, (_, i) => `t${i}`)));
    for (const n of [256, 257]) attempt(`tag chars ${n}`, () => this.ctx.acceptWebSocket(spare(), ["x".repeat(n)]));
    for (const n of [2048, 2049]) attempt(`auto-response bytes ${n}`, () => this.ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("x".repeat(n), "y")));
    this.ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
    for (const n of [604800000, 604800001]) attempt(`event timeout ms ${n}`, () => this.ctx.setHibernatableWebSocketEventTimeout(n));
    this.ctx.setHibernatableWebSocketEventTimeout();
    return out;
  }

  // connect is the TCP handler of stub.connect(): it answers each chunk it reads with
  // "<room>:" and the chunk, until the caller closes its side.
  async connect(socket) {
    const w = socket.writable.getWriter();
    const enc = new TextEncoder();
    const dec = new TextDecoder();
    for await (const chunk of socket.readable) {
      await w.write(enc.encode(`${this.ctx.id.name}:${dec.decode(chunk)}`));
    }
    await w.close();
  }

  async webSocketClose(ws, code, reason) {
    console.log(`ws close ${code} ${reason}`);
    await this.ctx.storage.put("lastClose", { code, reason });
  }

  async webSocketError(ws, err) {
    await this.ctx.storage.put("lastError", String(err));
  }
}

// tcp opens stub.connect() to the room, writes say, closes its side and answers with
// everything the room sent back.
async function tcp(stub, say) {
  const sock = stub.connect("room.internal:1");
  const w = sock.writable.getWriter();
  await w.write(new TextEncoder().encode(say));
  await w.close();
  return new Response(sock.readable);
}

export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    const m = /^\/room\/([^/]+)(\/.*)?$/.exec(url.pathname);
    if (url.pathname === "/id") return new Response(env.ROOMS.idFromName(url.searchParams.get("name")).toString());
    if (url.pathname === "/tcp") return tcp(env.ROOMS.getByName(url.searchParams.get("name")), url.searchParams.get("say"));
    if (!m) return new Response("not found\n", { status: 404 });
    return env.ROOMS.getByName(decodeURIComponent(m[1])).fetch(req);
  },
};
