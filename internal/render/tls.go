package render

import (
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Internal TLS (Options.InternalTLS; docs/security-internal-plane.md): the cross-pod
// sockets (rpc, gateway, trigger) require a client certificate, checked by the
// sidecar in front of them (serverSocket); the
// external services to other pods present the pod's certificate and trust only the
// namespace's CA for the namespace's server name. The files come from the pod's
// internal TLS Secret, mounted at podcontract.InternalTLSDir.

// tlsFile is the embed of one file of the pod's internal TLS Secret.
func tlsFile(name string) string { return embed(podcontract.InternalTLSSubdir + "/" + name) }

func keypair() string {
	return kv("keypair", tuple(kv("privateKey", tlsFile(podcontract.InternalTLSKey)),
		kv("certificateChain", tlsFile(podcontract.InternalTLSCert))))
}

// serverSocket is a cross-pod socket's protocol field: plain `http = (<opts>)` on
// workerd's loopback port, whatever o.InternalTLS: workerd bounds neither connections
// nor handshakes, so the sidecar owns the pod IP's port and terminates mutual TLS
// there (podcontract.FrontedSockets, internal/sidecar relay.go).
func serverSocket(httpOpts string) string { return "http = " + httpOpts }

// external is an external service's body reaching address, another pod of namespace
// ns: plain http, or, with internal TLS, https presenting the pod's certificate and
// trusting the namespace's CA for its server name.
func external(o Options, ns, address, httpOpts string) string {
	if !o.InternalTLS {
		return tuple(kv("address", Quote(address)), "http = "+httpOpts)
	}
	tlsOpts := tuple(keypair(), kv("trustedCertificates", list(tlsFile(podcontract.InternalTLSCA))))
	return tuple(kv("address", Quote(address)), kv("https", tuple(kv("options", httpOpts), kv("tlsOptions", tlsOpts),
		kv("certificateHost", Quote(podcontract.InternalServerName(namespaceOr(ns)))))))
}

// rpcOptions are the HttpOptions of an rpc-style socket or external service: a CONNECT
// to podcontract.RPCConnectHost opens Cap'n Proto RPC.
func rpcOptions() string { return tuple(kv("capnpConnectHost", Quote(podcontract.RPCConnectHost))) }
