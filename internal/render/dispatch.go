package render

import (
	"crypto/sha256"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// DispatchModule is the internal extension module (shim dispatch.js) of a
// dispatchNamespace binding: get(name) over an alias of the sidecar.
const (
	DispatchModule = "workerd-operator:dispatch"
	dispatchFile   = "dispatch.js"
	// DispatchServiceTag starts the rpc Service name of every user Worker
	// (DispatchServiceName); no Worker's name may start with it.
	DispatchServiceTag = "wfp-"
	// MaxUserWorkerName is the longest name of a user Worker: its rpc Service's name,
	// "wfp-<8 hex digits>-<name>", must be a DNS label (63 characters).
	MaxUserWorkerName = 63 - len(DispatchServiceTag) - 8 - 1
)

// DispatchServiceName is the rpc Service of user Worker `worker` of dispatch namespace
// dns: the name a dispatcher's sidecar resolves, so a Worker outside that dispatch
// namespace has no such name and get() reports it not found.
func DispatchServiceName(dns, worker string) string {
	h := sha256.Sum256([]byte(dns))
	return fmt.Sprintf("%s%x-%s", DispatchServiceTag, h[:4], worker)
}

// WorkerRPCServiceName is w's rpc Service: "<name>-rpc", or for a user Worker of a
// dispatch namespace its DispatchServiceName (it is reached only by dispatch).
func WorkerRPCServiceName(w *v1alpha1.Worker) string {
	if dns := w.Spec.DispatchNamespace; dns != "" {
		return DispatchServiceName(dns, w.Name)
	}
	return RPCServiceName(w.Name)
}

// DispatchService is the external service of dispatchNamespace binding name: an alias of
// the sidecar whose requests carry the dispatch namespace in
// podcontract.DispatchNamespaceHeader.
func DispatchService(name string) string { return podcontract.DispatchServicePrefix + name }

// DispatchDomain is the DNS domain under which the sidecar of a Worker of namespace ns
// resolves user Workers' rpc Services.
func DispatchDomain(ns string, opts Options) string {
	return fmt.Sprintf("%s.svc.%s", namespaceOr(ns), clusterDomain(opts))
}

// dispatchKind: Workers for Platforms' dispatch namespaces, through shim dispatch.js
// over an alias of the sidecar, which forwards each call to the user Worker's rpc
// socket (internal/sidecar/dispatch).
type dispatchKind struct {
	in      Input
	entries []v1alpha1.Binding
}

func newDispatchKind(in Input) (bindingKind, error) { return &dispatchKind{in: in}, nil }

func (k *dispatchKind) bind(field string, b v1alpha1.Binding) (string, error) {
	if b.DispatchNamespace.Namespace == "" {
		return "", fmt.Errorf("%s.dispatchNamespace.namespace: required", field)
	}
	k.entries = append(k.entries, b)
	return wrapped(DispatchModule, tuple(named("fetcher"), kv("service", Quote(DispatchService(b.Name)))),
		tuple(named("loader"), kv("workerLoader", tuple(kv("id", Quote(DispatchLoaderID(b.DispatchNamespace.Namespace)))))),
		tuple(named("internet"), kv("service", Quote(podcontract.DispatchLoaderService))),
		tuple(named("config"), kv("json", Quote(fmt.Sprintf(`{"maxShared":%d}`, b.DispatchNamespace.MaxSharedWorkers()))))), nil
}

// contribute adds one sidecar alias per binding, the module, and the sidecar's domain.
func (k *dispatchKind) contribute(x *extras) error {
	if len(k.entries) == 0 {
		return nil
	}
	for _, b := range k.entries {
		header := tuple(named(podcontract.DispatchNamespaceHeader), kv("value", Quote(b.DispatchNamespace.Namespace)))
		x.services.item(named(DispatchService(b.Name)), kv("external", "(http = "+tuple(kv("injectRequestHeaders", list(header)))+")"))
	}
	x.addExtension(DispatchModule, dispatchFile)
	x.sidecarEnv = append(x.sidecarEnv, corev1.EnvVar{Name: podcontract.DispatchDomainEnv, Value: DispatchDomain(k.in.Worker.Namespace, k.in.Options)})
	if api := k.in.Options.ManagerAPI; api != "" {
		x.sidecarEnv = append(x.sidecarEnv, corev1.EnvVar{Name: podcontract.DispatchAPIEnv, Value: api})
	}
	x.services.item(named(podcontract.DispatchLoaderService), kv("network", userWorkersNetwork(k.in.Options)))
	return x.addShims(dispatchFile)
}

// DispatchLoaderID is the workerLoader of dispatch namespace dns's Shared user Workers:
// one per dispatch namespace, so two namespaces' Workers never share a cache entry.
func DispatchLoaderID(dns string) string { return "user-workers:" + dns }

// userWorkersNetwork is the network Shared user Workers' code reaches: what a Dedicated
// user Worker without spec.outbound reaches (never an address of the cluster).
func userWorkersNetwork(opts Options) string {
	r := outbound.Rendered(outbound.UserWorker(outbound.Effective(nil, nil, opts.Outbound), opts.Outbound))
	allow := r.Allow
	if len(allow) == 0 {
		allow = []string{outbound.Public}
	}
	fields := []string{kv("allow", list(quoteAll(allow)...))}
	if len(r.Deny) > 0 {
		fields = append(fields, kv("deny", list(quoteAll(r.Deny)...)))
	}
	return tuple(append(fields, kv("tlsOptions", "(trustBrowserCas = true)"))...)
}

// DispatchServices are the external services of w's dispatchNamespace bindings, which
// take the sidecar's address (Args, localrun).
func DispatchServices(w *v1alpha1.Worker) []string {
	var out []string
	for _, b := range w.Spec.Bindings {
		if b.DispatchNamespace != nil {
			out = append(out, DispatchService(b.Name))
		}
	}
	return out
}

// DispatchedNamespaces are the dispatch namespaces w's bindings reach, once each.
func DispatchedNamespaces(w *v1alpha1.Worker) []string {
	seen := map[string]bool{}
	var out []string
	for _, b := range w.Spec.Bindings {
		if d := b.DispatchNamespace; d != nil && !seen[d.Namespace] {
			seen[d.Namespace] = true
			out = append(out, d.Namespace)
		}
	}
	return out
}
