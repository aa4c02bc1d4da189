// harness.js: runs testdata/vectors.json through internal/shim/failure.js inside
// workerd (used by TestVectorsJSInWorkerd). GET / -> 200 JSON array of
// {name, class?, retryable?, cause}, one per vector, in file order.
import { classifyCall, isRetryable, classifyError, classifyTermination } from "failure.js";
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

export default {
  async fetch() {
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
