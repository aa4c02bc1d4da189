// Package render renders a Worker (plus the ConfigMap, Workers, DurableObjectNamespaces
// and Workflows it references, resolved by the caller and passed in) into what its
// workerd pods run: a Cap'n Proto text config (config.capnp, `using Workerd = import
// "/workerd/workerd.capnp"; const config :Workerd.Config = (...)`), the files it embeds,
// the env vars of the workerd container and a content hash naming the version. Render is
// pure: no API calls, no files, no clock, stable order everywhere, so equal inputs give
// byte-equal outputs. Running the output locally (`workerd-operator render --check`,
// tests) is internal/localrun's job.
//
// Layout relative to /etc/workerd (docs/pod-contract.md):
//
//	config.capnp              the config
//	modules/<module name>     the user's modules (inline source), or the user's
//	                          ConfigMap mounted as is (configMap source), or the image
//	                          bundle (image source)
//	shim/<file>.js            the injected workers and extension modules (internal/shim)
//	assets/                   spec.assets: the asset image's directory (mounted, not
//	                          rendered; workerd runs in /etc/workerd to find it)
//
// Render is an orchestrator: resolveSource (source.go) resolves spec.source,
// renderBindings (bindings.go) runs every spec.bindings entry through the table of
// binding kinds, and writeConfig (config.go) writes the text with the capnp writer
// (capnp.go). A binding kind is one type implementing bindingKind, one row in
// bindingKinds: text, json, secretKeyRef and service in bindings.go,
// durableObjectNamespace in durableobjects.go, workflow in workflows.go, kvNamespace,
// d1Database and queue in datastores.go. Which field of
// an entry is set is decided once, by v1alpha1.Binding.Kind.
//
// Services in the config: the user's Worker (named after the Worker, or
// "worker:<name>" when that name is reserved: "internet", "sidecar"), "sidecar" (an
// external service whose address comes by flag), "workerd-operator:health" and
// "workerd-operator:trigger" (shims), what the bindings add, and with spec.assets
// "workerd-operator:assets" (assets.go): workerd's own assets service (AssetsService,
// Cloudflare's asset routing: html_handling, not_found_handling, run_worker_first,
// _headers and _redirects as JSON config) over the relative path "assets", with the
// user's Worker as its userWorker. The http socket then serves it instead of the
// Worker; rpc, health and trigger keep reaching the Worker. spec.assets.binding is a
// service binding to its "AssetWorker" entrypoint (files only). An assets-only Worker
// (spec.assets, no spec.source) has no user Worker: the assets service takes the
// compatibility date and flags and serves http, rpc and the trigger shim. docs/assets.md. Sockets "http", "rpc",
// "health" and "trigger" get their addresses by flag (see Args). The rpc socket and the
// external services to other Workers both set capnpConnectHost =
// podcontract.RPCConnectHost: with the pinned workerd this makes JS RPC (method calls,
// not only fetch) work between workerd processes. The http socket does not, so whoever
// reaches the http port (an Ingress) cannot open RPC.
//
// Sources: inline modules are written under modules/ in Files; a source.configMap
// Worker gets one module per ConfigMap key (type by extension, moduleTypes overrides,
// binaryData as Data or Wasm; the main key first, then the rest by key) and the
// ConfigMap is mounted as is, so its bytes are in Output.External only; a source.image
// Worker gets the modules spec.source.image.modules lists (main first) at
// modules/<name>, or main alone as an ES module, because the renderer cannot list the
// image's files (`import --image` writes the list).
//
// Bindings:
//   - text and json become text and json bindings; secretKeyRef a fromEnvironment
//     binding over the container env var WORKERD_SECRET_<name>, so a secret value never
//     lands in a ConfigMap.
//   - service: to the Worker itself, a service binding (a named entrypoint allowed); to
//     another Worker, an external service "service:<target>" at its rpc Service,
//     resolved by DNS per request, so a target that does not exist yet gives "DNS lookup
//     failed" at request time, not a startup failure. A named entrypoint of another
//     Worker is not supported: workerd cannot address one through an external service.
//   - durableObjectNamespace (durableobjects.go, docs/durable-objects.md): a `wrapped`
//     binding over the router (shim router.js, extension module
//     "workerd-operator:router") given Input.DurableObjects; Input.Host renders a shard
//     pod that hosts the class on localDisk and serves the gateway socket (shim
//     gateway.js), with the channels binding when enabled (docs/channels.md).
//   - workflow (workflows.go, docs/workflows.md): a `wrapped` binding over the engine's
//     sidecar, given Input.Workflows; Input.WorkflowHosts renders an engine pod with the
//     runner worker and the workflows socket.
//   - kvNamespace, d1Database, queue (datastores.go, docs/kv.md, docs/d1.md,
//     docs/queues.md): workerd's own kvNamespace, d1-api `wrapped` and queue bindings
//     over an external service "<kind>:<name>" to the store's gateway, given
//     Input.DataStores; Input.DataHost renders the store's host pod running the
//     bundled /workerd/kv.js, d1.js or queues.js (a Queue's with its consumer's code).
package render
