package render

import (
	"fmt"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// ServiceAddress returns "<worker>.<namespace>.svc.<domain>:<http port>", the in-cluster
// address of a Worker's Service http port (docs/pod-contract.md).
func ServiceAddress(w *v1alpha1.Worker, opts Options) string {
	return serviceHost(w.Name, w.Namespace, opts) + fmt.Sprintf(":%d", HTTPPort(w))
}

// RPCServiceName is the name of a Worker's rpc Service: "<name>-rpc".
func RPCServiceName(name string) string { return name + "-rpc" }

// RPCAddress returns "<worker>-rpc.<namespace>.svc.<domain>:9095", the rpc Service,
// where service bindings from other Workers connect (podcontract.RPCPort).
func RPCAddress(w *v1alpha1.Worker, opts Options) string {
	return serviceHost(WorkerRPCServiceName(w), w.Namespace, opts) + fmt.Sprintf(":%d", podcontract.RPCPort)
}

func serviceHost(name, ns string, opts Options) string {
	return fmt.Sprintf("%s.%s.svc.%s", name, namespaceOr(ns), clusterDomain(opts))
}

// namespaceOr is ns, or "default" for an object read from a manifest without one.
func namespaceOr(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

func clusterDomain(opts Options) string {
	if opts.ClusterDomain == "" {
		return DefaultClusterDomain
	}
	return opts.ClusterDomain
}

// HTTPPort is spec.service.port, default podcontract.DefaultHTTPPort.
func HTTPPort(w *v1alpha1.Worker) int32 {
	if w.Spec.Service != nil && w.Spec.Service.Port != nil {
		return *w.Spec.Service.Port
	}
	return podcontract.DefaultHTTPPort
}

// MemoryMiB is spec.limits.memoryMiB, default DefaultMemoryMiB.
func MemoryMiB(w *v1alpha1.Worker) int32 {
	if w.Spec.Limits != nil && w.Spec.Limits.MemoryMiB != nil {
		return *w.Spec.Limits.MemoryMiB
	}
	return DefaultMemoryMiB
}

// Args returns the workerd container args per docs/pod-contract.md:
//
//	serve --experimental /etc/workerd/config.capnp --socket-addr=http=$(POD_IP):<port>
//	--socket-addr=rpc=127.0.0.1:9195 --socket-addr=health=$(POD_IP):9090
//	--socket-addr=trigger=127.0.0.1:9191 --external-addr=sidecar=127.0.0.1:9092
//	--external-addr=workerd-operator:cache=127.0.0.1:9092 [--external-addr=r2:<bucket>=127.0.0.1:9092 ...]
//
// Kubernetes expands $(POD_IP) from the container's env (downward API status.podIP).
// The sidecar listens on the loopback for workerd (podcontract.LoopbackHost) and fronts
// rpc and trigger on the pod IP (podcontract.FrontedSockets).
func Args(w *v1alpha1.Worker) []string {
	args := []string{
		"serve", "--experimental", podcontract.ConfigDir + "/" + podcontract.ConfigFile,
		socketAddr(podcontract.HTTPSocket, HTTPPort(w)),
		socketAddr(podcontract.RPCSocket, podcontract.RPCPort),
		socketAddr(podcontract.HealthSocket, podcontract.HealthPort),
		socketAddr(podcontract.TriggerSocket, podcontract.TriggerPort),
		fmt.Sprintf("--external-addr=%s=%s:%d", podcontract.SidecarService, podcontract.LoopbackHost, podcontract.SidecarPort),
	}
	// The Cache API's, the R2Buckets' and the ai bindings' services are aliases of the sidecar.
	for _, s := range SidecarAliases(w) {
		args = append(args, fmt.Sprintf("--external-addr=%s=%s:%d", s, podcontract.LoopbackHost, podcontract.SidecarPort))
	}
	return args
}

// SidecarAliases are the external services besides "sidecar" that reach the pod's
// sidecar: the Cache API's (podcontract.CacheService), the R2Buckets' (r2.go), the
// ai bindings' (ai.go) and the dispatchNamespace bindings' (dispatch.go).
func SidecarAliases(w *v1alpha1.Worker) []string {
	out := append([]string{podcontract.CacheService}, R2Services(w)...)
	return append(append(out, AIServices(w)...), DispatchServices(w)...)
}

// socketAddr is the flag binding socket name to the pod IP and port, or, for a socket
// the sidecar fronts, to its loopback port (podcontract.FrontedSockets).
func socketAddr(name string, port int32) string {
	if f, ok := podcontract.Fronted(name); ok {
		return fmt.Sprintf("--socket-addr=%s=%s:%d", name, podcontract.LoopbackHost, f.InnerPort)
	}
	return fmt.Sprintf("--socket-addr=%s=$(%s):%d", name, podcontract.PodIPEnv, port)
}

// WorkerServiceName is the name of the user's Worker in the rendered config: the
// Worker's name, or "worker:<name>" when the name is reserved ("internet", "sidecar").
// workerd's startup errors start with "service <this name>: ".
func WorkerServiceName(name string) string {
	switch name {
	case podcontract.InternetService, podcontract.SidecarService:
		return "worker:" + name
	}
	return name
}
