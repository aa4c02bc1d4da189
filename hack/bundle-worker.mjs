// Bundles a Worker's entry module and the npm packages it imports into one ES module for
// workerd, as wrangler does for nodejs_compat Workers: Node built-ins stay imports of
// "node:<name>" (workerd provides them), and a CommonJS require() of one gets a small
// module re-exporting the import, since an ES module bundle has no require().
//
//   NODE_PATH=<dir>/node_modules node hack/bundle-worker.mjs <entry.js> <out.js>
// (esbuild and the packages the entry imports come from NODE_PATH).
import { builtinModules, createRequire } from "node:module";
import path from "node:path";

const nodePath = process.env.NODE_PATH;
const { build } = createRequire(path.join(nodePath, "/"))("esbuild");

const [entry, outfile] = process.argv.slice(2);
const builtins = new Set(builtinModules.flatMap((m) => [m, "node:" + m]));

const nodeBuiltins = {
  name: "node-builtins",
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (!builtins.has(args.path)) return undefined;
      const name = args.path.startsWith("node:") ? args.path : "node:" + args.path;
      if (args.kind === "require-call") return { path: name, namespace: "node-require" };
      return { path: name, external: true };
    });
    b.onLoad({ filter: /.*/, namespace: "node-require" }, (args) => ({
      contents: `import * as m from ${JSON.stringify(args.path)}; module.exports = m.default ?? m;`,
      loader: "js",
      resolveDir: ".",
    }));
  },
};

await build({
  entryPoints: [entry],
  outfile,
  bundle: true,
  format: "esm",
  platform: "neutral",
  conditions: ["workerd", "worker"],
  mainFields: ["module", "main"],
  external: ["cloudflare:*"],
  nodePaths: [nodePath],
  plugins: [nodeBuiltins],
  logLevel: "error",
});
