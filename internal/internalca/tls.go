package internalca

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Pool is a certificate pool of the PEM certificates given.
func Pool(pems ...[]byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	for _, b := range pems {
		if !p.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("internalca: no certificate in a CA bundle")
		}
	}
	return p, nil
}

// ServerConfig is the TLS config of a pod's cross-pod listener from the files of the
// internal TLS Secret in dir (podcontract.InternalTLSDir): the pod's certificate, and
// client certificates verified against the namespace's CA and the manager's CA when
// given. Handlers require a verified certificate (Verified) for everything but probes.
func ServerConfig(dir string) (*tls.Config, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, podcontract.InternalTLSCert), filepath.Join(dir, podcontract.InternalTLSKey))
	if err != nil {
		return nil, fmt.Errorf("internal TLS: %w", err)
	}
	ca, err := read(podcontract.InternalTLSCA)
	if err != nil {
		return nil, fmt.Errorf("internal TLS: %w", err)
	}
	mgr, err := read(podcontract.InternalTLSManagerCA)
	if err != nil {
		return nil, fmt.Errorf("internal TLS: %w", err)
	}
	pool, err := Pool(ca, mgr)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// Verified reports whether the connection's client presented a certificate that
// verified against the server's ClientCAs.
func Verified(cs *tls.ConnectionState) bool {
	return cs != nil && len(cs.VerifiedChains) > 0
}

// ClientConfig is the TLS config of a client of namespace ns's pods presenting
// certPEM/keyPEM (the manager's client certificate) and trusting only caPEM (the
// namespace's CA) for podcontract.InternalServerName(ns).
func ClientConfig(certPEM, keyPEM, caPEM []byte, ns string) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("internal TLS client certificate: %w", err)
	}
	pool, err := Pool(caPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   podcontract.InternalServerName(ns),
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// PodClientConfig is ClientConfig from the pod's own files in dir: its certificate,
// trusting its namespace ns's CA (a sidecar calling another pod of its namespace).
func PodClientConfig(dir, ns string) (*tls.Config, error) {
	var pems [3][]byte
	for i, name := range []string{podcontract.InternalTLSCert, podcontract.InternalTLSKey, podcontract.InternalTLSCA} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("internal TLS: %w", err)
		}
		pems[i] = b
	}
	return ClientConfig(pems[0], pems[1], pems[2], ns)
}

// NamespaceSecretData is the data of namespace ns's podcontract.InternalTLSSecret: its
// CA (ca, with key) and a certificate for podcontract.InternalServerName(ns), plus the
// manager's CA certificate. cur is the current data: what is still valid is kept.
func NamespaceSecretData(ns string, cur map[string][]byte, managerCA []byte, now func() time.Time) (map[string][]byte, error) {
	ca, err := Parse(cur[podcontract.InternalTLSCA], cur[podcontract.InternalTLSCAKey])
	if err != nil || now().Add(RenewBefore).After(ca.Cert.NotAfter) {
		if ca, err = New("workerd-operator namespace "+ns, now()); err != nil {
			return nil, err
		}
	}
	out := map[string][]byte{
		podcontract.InternalTLSCA: ca.CertPEM, podcontract.InternalTLSCAKey: ca.KeyPEM,
		podcontract.InternalTLSManagerCA: managerCA,
		podcontract.InternalTLSCert:      cur[podcontract.InternalTLSCert], podcontract.InternalTLSKey: cur[podcontract.InternalTLSKey],
	}
	if !ca.Fresh(out[podcontract.InternalTLSCert], out[podcontract.InternalTLSKey], now()) {
		name := podcontract.InternalServerName(ns)
		if out[podcontract.InternalTLSCert], out[podcontract.InternalTLSKey], err = ca.Issue(name, []string{name}, now()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PodFiles are the keys of the internal TLS Secret a pod mounts: all but the CA key.
var PodFiles = []string{podcontract.InternalTLSCA, podcontract.InternalTLSCert, podcontract.InternalTLSKey, podcontract.InternalTLSManagerCA}

// WriteFiles writes PodFiles of a Secret's data into dir, as the pod's volume holds them.
func WriteFiles(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, k := range PodFiles {
		if err := os.WriteFile(filepath.Join(dir, k), data[k], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// SocketConfig is the TLS config of one of workerd's cross-pod sockets the sidecar
// fronts (podcontract.FrontedSockets): the pod's certificate from dir, and a client
// certificate required and verified against the CA in file trustedCA of dir only, as
// workerd's own tlsOptions (requireClientCerts, trustedCertificates) would.
func SocketConfig(dir, trustedCA string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, podcontract.InternalTLSCert), filepath.Join(dir, podcontract.InternalTLSKey))
	if err != nil {
		return nil, fmt.Errorf("internal TLS: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, trustedCA))
	if err != nil {
		return nil, fmt.Errorf("internal TLS: %w", err)
	}
	pool, err := Pool(ca)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}
