package render

import (
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Internal TLS (Options.InternalTLS; docs/security-internal-plane.md): the cross-pod
// sockets (rpc, gateway, trigger) are https and require a client certificate; the
// external services to other pods present the pod's certificate and trust only the
// namespace's CA for the namespace's server name. The files come from the pod's
// internal TLS Secret, mounted at podcontract.InternalTLSDir.

// tlsFile is the embed of one file of the pod's internal TLS Secret.
func tlsFile(name string) string { return embed(podcontract.InternalTLSSubdir + "/" + name) }

func keypair() string {
	return kv("keypair", tuple(kv("privateKey", tlsFile(podcontract.InternalTLSKey)),
		kv("certificateChain", tlsFile(podcontract.InternalTLSCert))))
}

// serverSocket is a socket's protocol field: `http = (<opts>)` or, with internal TLS,
// https requiring a client certificate signed by the CA in file trust.
func serverSocket(o Options, httpOpts, trust string) string {
	if !o.InternalTLS {
		return "http = " + httpOpts
	}
	tlsOpts := tuple(keypair(), "requireClientCerts = true", kv("trustedCertificates", list(tlsFile(trust))))
	return kv("https", tuple(kv("options", httpOpts), kv("tlsOptions", tlsOpts)))
}

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
