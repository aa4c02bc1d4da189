// Package workerdconfig renders a Worker (plus the ConfigMap and other Workers it
// references, passed in) into what its workerd pods run: a Cap'n Proto text config
// (config.capnp, `using Workerd = import "/workerd/workerd.capnp"; const config
// :Workerd.Config = (...)`), the module files it embeds, the env vars of the workerd
// container and a content hash naming the version. Render is pure: no API calls, no
// clock, stable order everywhere, so equal inputs give byte-equal outputs.
//
// Layout relative to /etc/workerd (docs/pod-contract.md):
//
//	config.capnp              the config
//	modules/<module name>     the user's modules (inline source), or the user's
//	                          ConfigMap mounted as is (configMap source), or the image
//	                          bundle (image source)
//	shim/<file>.js            the injected health and trigger workers (internal/shim)
//
// Services in the config: the user's Worker (named after the Worker, or
// "worker:<name>" when that name is reserved: "internet", "sidecar"), "sidecar" (an
// external service whose address comes by flag), "workerd-operator:health" and
// "workerd-operator:trigger" (shims), and "service:<target>" per Worker named by a
// service binding. Sockets "http", "rpc", "health" and "trigger" get their addresses by
// flag (see Args). The rpc socket and the external services to other Workers both set
// capnpConnectHost = podcontract.RPCConnectHost: checked with the pinned workerd 1.20261117.1, this
// makes JS RPC (method calls, not only fetch) work between workerd processes. The http
// socket does not, so whoever reaches the http port (an Ingress) cannot open RPC.
//
// Sources: inline modules are written under modules/ in Files; a source.configMap
// Worker gets one module per ConfigMap key (type by extension, moduleTypes overrides,
// binaryData as Data or Wasm; the main key first, then the rest by key) and the
// ConfigMap is mounted as is, so its bytes are in Output.External only; a source.image
// Worker gets only its main module (ESModule) at modules/<main>: an image bundle must
// be a single module (bundle it with esbuild or wrangler), because the renderer cannot
// list the image's files.
//
// Service bindings to other Workers go through external services whose addresses are
// resolved by DNS per request: a target Service that does not exist yet gives
// "DNS lookup failed" errors at request time, not a startup failure.
//
// Durable Objects (durableobjects.go): a durableObjectNamespace binding becomes a
// `wrapped` binding over the router (shim router.js, extension module
// "workerd-operator:router") given Input.DurableObjects; Input.Host renders a shard
// pod that hosts the class on localDisk and serves the gateway socket (shim gateway.js).
//
// Not rendered yet: workflow bindings (Render returns an error naming the binding),
// and named entrypoints of another Worker (workerd cannot
// address a named entrypoint through an external service; a service binding to the
// Worker itself may name one).
//
// local.go additionally starts the pinned workerd on rendered files on loopback, for
// `workerd-operator render --check` and tests.
package render
