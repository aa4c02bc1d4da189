// router-common.js: what the Durable Object router (router.js) and the shard gateway
// (gateway.js) share. Loaded as the extension module "workerd-operator:router-common".
//
// Which shard owns an id: the JavaScript twin of the Go jump hash in internal/render;
// both are pinned by the vectors in internal/render/testdata/do/jumphash-vectors.json,
// run in the pinned workerd.
//
// What crosses shards: JS RPC arguments and results go between workerd processes over
// Cap'n Proto (capnpConnectHost); the router only sends structured-clone data (null,
// booleans, numbers, bigints, strings, plain objects, arrays, Date, RegExp, Map, Set,
// Error, ArrayBuffer and its views), in-process and across shards alike, so a call
// behaves the same wherever its object lives. Functions, RPC stubs, RpcTargets, class
// instances, symbols and streams fail with a TypeError naming the argument path.
//
// Exports:
//   assertCrossable(v, where) -> throws TypeError "<where> is a function ..." when v
//                            (walked recursively, 64 levels at most) holds something
//                            that is not structured-clone data.
//   fnv1a64(s)            -> BigInt: 64-bit FNV-1a of the UTF-8 bytes of string s.
//   jumpHash(key, n)      -> shard 0..n-1 for a BigInt key (Lamping & Veach, "A Fast,
//                            Minimal Memory, Consistent Hash Algorithm", 2014).
//   shardFor(idString, n) -> jumpHash(fnv1a64(idString), n): the shard of an object id
//                            (DurableObjectId.toString(), 64 hex chars). n is 1..64
//                            (api DurableObjectNamespace.spec.shards); throws a
//                            RangeError naming the limit otherwise.

const MASK = (1n << 64n) - 1n;

// The most shards a namespace can have (api DurableObjectNamespace.spec.shards, render.MaxShards).
export const MAX_SHARDS = 64;
const FNV_OFFSET = 14695981039346656037n;
const FNV_PRIME = 1099511628211n;
const JUMP_MUL = 2862933555777941757n;
const enc = new TextEncoder();

export function fnv1a64(s) {
  let h = FNV_OFFSET;
  for (const b of enc.encode(String(s))) {
    h ^= BigInt(b);
    h = (h * FNV_PRIME) & MASK;
  }
  return h;
}

export function jumpHash(key, n) {
  let b = -1;
  let j = 0;
  while (j < n) {
    b = j;
    key = (key * JUMP_MUL + 1n) & MASK;
    j = Math.floor((b + 1) * (2147483648 / (Number(key >> 33n) + 1)));
  }
  return b;
}

export function shardFor(idString, n) {
  if (!Number.isInteger(n) || n < 1 || n > MAX_SHARDS) {
    throw new RangeError(`shards must be an integer from 1 to ${MAX_SHARDS} (api DurableObjectNamespace.spec.shards), got ${n}`);
  }
  return jumpHash(fnv1a64(idString), n);
}

const CLONEABLE = [Date, RegExp, ArrayBuffer, Error, Boolean, Number, String];

export function assertCrossable(v, where, depth = 0) {
  const t = typeof v;
  if (v === null || t === "undefined" || t === "boolean" || t === "number" || t === "bigint" || t === "string") return;
  const why = (what) => new TypeError(
    `${where} is ${what}, which cannot cross between shards of a Durable Object namespace: ` +
    "the workerd-operator router carries structured-clone data only (no functions, RPC stubs, " +
    "RpcTargets, class instances or streams)");
  if (t === "function") return throwIt(why("a function or an RPC stub"));
  if (t === "symbol") return throwIt(why("a symbol"));
  if (depth > 64) return throwIt(why("nested deeper than 64 levels"));
  if (Array.isArray(v)) {
    v.forEach((x, i) => assertCrossable(x, `${where}[${i}]`, depth + 1));
    return;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto === Object.prototype || proto === null) {
    for (const k of Object.keys(v)) assertCrossable(v[k], `${where}.${k}`, depth + 1);
    return;
  }
  if (ArrayBuffer.isView(v) || CLONEABLE.some((c) => v instanceof c)) return;
  if (v instanceof Map) {
    let i = 0;
    for (const [k, x] of v) {
      assertCrossable(k, `${where}<key ${i}>`, depth + 1);
      assertCrossable(x, `${where}<value ${i}>`, depth + 1);
      i++;
    }
    return;
  }
  if (v instanceof Set) {
    let i = 0;
    for (const x of v) assertCrossable(x, `${where}<element ${i++}>`, depth + 1);
    return;
  }
  const name = (proto && proto.constructor && proto.constructor.name) || "an object";
  if (typeof ReadableStream !== "undefined" && v instanceof ReadableStream) return throwIt(why("a ReadableStream"));
  return throwIt(why(`an instance of ${name}`));
}

function throwIt(e) {
  throw e;
}
