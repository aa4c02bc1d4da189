// harness.js: runs testdata/vectors.json through internal/shim/failure.js inside
// workerd (used by TestVectorsJSInWorkerd). GET / -> 200 JSON array of
// {name, class?, retryable?, cause}, one per vector, in file order.
// GET /retries -> 200 JSON array of {name, calls, ok}, one per retry scenario.
import { classifyCall, isRetryable, classifyError, classifyTermination, callWithRetry } from "failure.js";
import doc from "vectors.json";

// toError rebuilds a real Error (or AggregateError) with ES2022 cause and the
// runtime's flags from the vector's plain object.
function toError(o) {
  const cause = o.cause ? { cause: toError(o.cause) } : undefined;
  const e = o.errors
    ? new AggregateError(o.errors.map(toError), o.message, cause)
    : new Error(o.message, cause);
  if (o.name) e.name = o.name;
  for (const k of ["retryable", "overloaded", "remote"]) {
    if (o[k] === true) e[k] = true;
  }
  return e;
}

async function retries() {
  const out = [];
  for (const r of doc.retries) {
    let calls = 0;
    let ok = true;
    try {
      await callWithRetry(async (n) => {
        calls = n;
        if (n <= r.errors.length) throw toError(r.errors[n - 1]);
        return "ok";
      }, { attempts: r.attempts, baseMs: 0, maxMs: 0 });
    } catch {
      ok = false;
    }
    out.push({ name: r.name, calls, ok });
  }
  return out;
}

export default {
  async fetch(request) {
    if (new URL(request.url).pathname === "/retries") return Response.json(await retries());
    const out = doc.vectors.map((v) => {
      if (v.kind === "call") {
        const err = toError(v.error);
        const cls = classifyCall(err);
        return { name: v.name, class: cls, retryable: isRetryable(cls), cause: classifyError(err) };
      }
      return { name: v.name, cause: classifyTermination(v.termination) };
    });
    return Response.json(out);
  },
};
