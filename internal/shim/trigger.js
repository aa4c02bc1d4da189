// trigger.js: the worker behind workerd's `trigger` socket (docs/pod-contract.md).
// Needs compatibility flag service_binding_extra_handlers (and workerd --experimental);
// env.TARGET is a service binding to the user's Worker.
//   POST /scheduled {"cron":"<expr>","scheduledTime":<ms>} -> 200 {"outcome","noRetry"}
//                                                          -> 400 {"error"} if malformed
//   POST /scheduled-batch {"runs":[{"cron","scheduledTime"}, ...]} (1..1000 runs, all
//        started at once) -> 200 application/x-ndjson, one line per run as it finishes:
//        {"index":<i>,"outcome","noRetry"}; -> 400 {"error"} if malformed
//   GET /cdn-cgi/local/scheduled?cron=<expr>&time=<ms>[&format=json]
//       (also /cdn-cgi/handler/scheduled) -> 200 "ok" | 500 "<outcome>" | the JSON above
function json(status, value) {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "content-type": "application/json" },
  });
}

async function run(env, cron, ms) {
  let result;
  try {
    result = await env.TARGET.scheduled({ cron, scheduledTime: new Date(ms) });
  } catch (e) {
    return { outcome: "exception", noRetry: false, error: String(e && e.message ? e.message : e) };
  }
  return {
    outcome: result && typeof result.outcome === "string" ? result.outcome : "exception",
    noRetry: !!(result && result.noRetry),
  };
}

// maxBatch bounds /scheduled-batch (the dispatcher sends at most this many).
const maxBatch = 1000;

// checkRun returns why r is not a {cron, scheduledTime} run, or "". where names it in
// the message ("runs[3]"; "" for the whole body).
function checkRun(r, where) {
  if (r === null || typeof r !== "object" || Array.isArray(r)) {
    return `${where || "body"} must be an object {"cron":string,"scheduledTime":number}`;
  }
  const at = where ? `${where}.` : "";
  if (typeof r.cron !== "string") {
    return `${at}cron must be a string`;
  }
  if (typeof r.scheduledTime !== "number" || !Number.isFinite(r.scheduledTime)) {
    return `${at}scheduledTime must be a number (ms since epoch)`;
  }
  return "";
}

// postBody reads a POST request's JSON body: {body} or {response} (405, 400).
async function postBody(request, path) {
  if (request.method !== "POST") {
    return { response: json(405, { error: `POST ${path} only` }) };
  }
  try {
    return { body: await request.json() };
  } catch (e) {
    return { response: json(400, { error: `body is not JSON: ${e.message}` }) };
  }
}

// batch starts every run at once and streams one NDJSON line per run as it finishes,
// so the caller records each outcome (and its own wall-time limit) independently.
function batch(env, runs) {
  const { readable, writable } = new TransformStream();
  const writer = writable.getWriter();
  const enc = new TextEncoder();
  let chain = Promise.resolve();
  const done = runs.map((r, index) =>
    run(env, r.cron, r.scheduledTime).then((res) => {
      chain = chain.then(() => writer.write(enc.encode(JSON.stringify({ index, ...res }) + "\n")));
      return chain;
    }),
  );
  // Not waitUntil: the open response keeps the runs going; a caller that hangs up (its
  // wall-time limit) stops the stream (whether workerd also cancels the runs is its own
  // behaviour: docs/cron.md).
  Promise.all(done).then(() => chain).then(() => writer.close()).catch(() => {});
  return new Response(readable, { headers: { "content-type": "application/x-ndjson" } });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/scheduled-batch") {
      const { body, response } = await postBody(request, url.pathname);
      if (response) {
        return response;
      }
      const runs = body && body.runs;
      if (!Array.isArray(runs) || runs.length === 0 || runs.length > maxBatch) {
        return json(400, { error: `body must be {"runs":[{"cron":string,"scheduledTime":number}, ...]} with 1 to ${maxBatch} runs` });
      }
      for (let i = 0; i < runs.length; i++) {
        const why = checkRun(runs[i], `runs[${i}]`);
        if (why !== "") {
          return json(400, { error: why });
        }
      }
      return batch(env, runs);
    }
    if (url.pathname === "/scheduled") {
      const { body, response } = await postBody(request, url.pathname);
      if (response) {
        return response;
      }
      const why = checkRun(body, "");
      if (why !== "") {
        return json(400, { error: why });
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
    return json(404, { error: "not found: POST /scheduled, POST /scheduled-batch or GET /cdn-cgi/local/scheduled" });
  },
};
