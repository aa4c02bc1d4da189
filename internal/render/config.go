package render

import (
	"fmt"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/shim"
)

// writeConfig writes config.capnp: the user's Worker, what the bindings add, the
// sidecar and the shims, and the sockets whose addresses come by flag (Args).
func writeConfig(w *v1alpha1.Worker, modules []module, flags []string, x *extras) []byte {
	c := &capnp{}
	c.line("# Rendered by workerd-operator for Worker ", namespaceOr(w.Namespace), "/", w.Name, ". Do not edit: the operator")
	c.line("# overwrites it. Socket and sidecar addresses come by flag (docs/pod-contract.md).")
	c.line(`using Workerd = import "/workerd/workerd.capnp";`)
	c.line()
	c.open("const config :Workerd.Config = (")
	c.open("services = [")
	if len(modules) > 0 {
		writeUserWorker(c, w, modules, flags, x)
	}
	c.splice(&x.services)
	writeShimServices(c, x.workerService, x.healthBindings)
	writeIngressService(c, x.httpService, splitBindings(x.split))
	writeTailService(c, w.Name, w.Spec.VersionID())
	c.close("],")
	c.open("sockets = [")
	writeSockets(c, x.workerService, w.Spec.DispatchNamespace != "")
	c.splice(&x.sockets)
	c.close("],")
	if len(x.extensions) > 0 {
		c.open("extensions = [(modules = [")
		for _, e := range x.extensions {
			c.item(named(e.name), kv("esModule", embed(podcontract.ShimSubdir+"/"+e.file)), "internal = true")
		}
		c.close("])],")
	}
	c.field("v8Flags", list(Quote(fmt.Sprintf("--max-old-space-size=%d", MemoryMiB(w))), Quote(semiSpaceFlag)))
	c.field("logging", "(structuredLogging = true)")
	c.close(");")
	return []byte(c.String())
}

// writeUserWorker writes the user's Worker: its modules, compatibility and bindings.
func writeUserWorker(c *capnp, w *v1alpha1.Worker, modules []module, flags []string, x *extras) {
	c.openWorker(WorkerServiceName(w.Name))
	c.open("modules = [")
	for _, m := range modules {
		c.item(named(m.name), kv(capnpModuleFields[m.typ], embed(podcontract.ModulesSubdir+"/"+m.name)))
	}
	c.close("],")
	c.field("compatibilityDate", Quote(w.Spec.CompatibilityDate))
	c.field("cacheApiOutbound", Quote(podcontract.CacheService))
	if len(flags) > 0 {
		c.field("compatibilityFlags", list(quoteAll(flags)...))
	}
	if len(x.bindings) > 0 {
		c.open("bindings = [")
		for _, b := range x.bindings {
			c.item(named(b.name), b.value)
		}
		c.close("],")
	}
	c.splice(&x.worker)
	if len(x.tails) > 0 {
		c.field("tails", list(x.tails...))
	}
	if !x.opts.NoInvocationMetrics {
		c.field("streamingTails", list(Quote(podcontract.TailService)))
	}
	c.closeWorker()
}

// writeShimServices writes the sidecar's external services (itself and the Cache API's
// alias) and the health and trigger
// shim workers (internal/shim); the trigger shim calls the user's Worker svcName, the
// health shim has healthBindings besides SIDECAR.
func writeShimServices(c *capnp, svcName string, healthBindings []string) {
	c.item(named(podcontract.SidecarService), "external = (http = ())")
	// The Cache API's requests: proxy style keeps the scheme and host in the request
	// target, the cache's key; the injected Host (proxy style sends none) is what an
	// HTTP/1.1 server requires. The address comes by flag (Args) like the sidecar's; the
	// one here, the sidecar's in a pod, lets a config run without the flag start.
	c.item(named(podcontract.CacheService), kv("external", tuple(
		kv("address", Quote(fmt.Sprintf("%s:%d", podcontract.LoopbackHost, podcontract.SidecarPort))),
		"http = "+tuple("style = proxy", kv("injectRequestHeaders", list(
			tuple(named(podcontract.CacheHeader), kv("value", Quote("1"))),
			tuple(named("Host"), kv("value", Quote(podcontract.CacheService)))))))))
	c.openWorker(podcontract.HealthService)
	c.field("modules", list(shimModule(shim.HealthModule)))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	c.field("bindings", list(append([]string{tuple(named("SIDECAR"), kv("service", Quote(podcontract.SidecarService)))}, healthBindings...)...))
	c.closeWorker()
	c.openWorker(podcontract.TriggerService)
	c.field("modules", list(shimModule(shim.TriggerModule)))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	c.field("compatibilityFlags", list(Quote("service_binding_extra_handlers")))
	c.field("bindings", list(tuple(named("TARGET"), kv("service", Quote(svcName)))))
	c.closeWorker()
}

// LoopLimitStatus is the HTTP status of error 1019 (loop limit). Cloudflare documents
// the error code, not the status
// (https://developers.cloudflare.com/workers/observability/errors/#loop-limit); 508 Loop
// Detected (RFC 5842, section 7.2) says what happened (docs/pod-contract.md "Loop limit").
const LoopLimitStatus = 508

// writeIngressService writes the ingress shim worker (ingress.js) the http socket
// serves: it keeps the loop limit and sets request.cf (from the sidecar), then hands
// the request to httpSvc, or, in a gradual deployment, to the pods of the version it
// picks (split).
func writeIngressService(c *capnp, httpSvc string, split []string) {
	c.openWorker(podcontract.IngressService)
	c.field("modules", list(shimModule(shim.IngressModule)))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	c.field("bindings", list(append([]string{
		tuple(named("TARGET"), kv("service", Quote(httpSvc))),
		tuple(named("LOOP_LIMIT"), kv("json", Quote(fmt.Sprint(limits.Get(limits.DefaultProfile, limits.LoopInvocations))))),
		tuple(named("LOOP_STATUS"), kv("json", Quote(fmt.Sprint(LoopLimitStatus)))),
		tuple(named("SIDECAR"), kv("service", Quote(podcontract.SidecarService))),
		tuple(named("REQUEST_CF_PATH"), kv("text", Quote(podcontract.RequestCFPath))),
	}, split...)...))
	c.closeWorker()
}

// writeTailService writes the streaming tail worker (shim tail.js) of the user's Worker:
// it reaches the sidecar and knows the Worker's name and version, the `worker` and
// `version` labels of its series.
func writeTailService(c *capnp, worker, version string) {
	c.openWorker(podcontract.TailService)
	c.field("modules", list(shimModule(shim.TailModule)))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	c.field("bindings", list(
		tuple(named("SIDECAR"), kv("service", Quote(podcontract.SidecarService))),
		tuple(named("WORKER"), kv("text", Quote(worker))),
		tuple(named("VERSION"), kv("text", Quote(version))),
		tuple(named("TAIL_PATH"), kv("text", Quote(podcontract.TailPath))),
	))
	c.closeWorker()
}

// writeSockets writes the sockets every pod has: http serves the ingress shim, in front
// of httpSvc (the user's Worker svcName, or the assets service in front of it); rpc the
// Worker itself. Only rpc sets
// capnpConnectHost, so a client of the http port (an Ingress) cannot open Cap'n Proto
// RPC to the Worker. With internal TLS, rpc admits the namespace's pods and trigger
// the manager only. A user Worker's rpc socket takes the scheme of a dispatched
// request's URL from the dispatcher (podcontract.ForwardedProtoHeader).
func writeSockets(c *capnp, svcName string, userWorker bool) {
	rpc := rpcOptions()
	if userWorker {
		rpc = tuple(kv("capnpConnectHost", Quote(podcontract.RPCConnectHost)), kv("forwardedProtoHeader", Quote(podcontract.ForwardedProtoHeader)))
	}
	c.item(named(podcontract.HTTPSocket), "http = ()", kv("service", Quote(podcontract.IngressService)))
	c.item(named(podcontract.RPCSocket), serverSocket(rpc), kv("service", Quote(svcName)))
	c.item(named(podcontract.HealthSocket), "http = ()", kv("service", Quote(podcontract.HealthService)))
	c.item(named(podcontract.TriggerSocket), serverSocket("()"), kv("service", Quote(podcontract.TriggerService)))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Quote(s)
	}
	return out
}

// semiSpaceFlag caps each isolate's young generation at 1 MiB a semi-space. With V8's
// default a busy isolate's young generation holds about 100 MiB more resident memory
// (the pinned workerd serving a trivial Worker flat out: 318 MiB resident with the
// default, 224 MiB with this, the same requests per second), and a pod runs several
// isolates (the Worker and the shims) under one container memory limit.
const semiSpaceFlag = "--max-semi-space-size=1"
