package containers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// ServerTLSConfig is the TLS config of the API's listener: the manager's certificate
// from getCert, and a client certificate required. The handshake cannot check it (each
// namespace has a CA of its own, picked by the certificate's name), so the Handler
// verifies it on every request; a connection without one fails the handshake.
func ServerTLSConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		GetCertificate: getCert,
		ClientAuth:     tls.RequireAnyClientCert,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
	}
}

// caRefreshAfter: a certificate that fails against a cached CA at least this old is
// checked again against a fresh read, so a renewed CA is picked up at once.
const caRefreshAfter = 5 * time.Second

// authenticator finds the caller's namespace from its client certificate: the one DNS
// name of the form podcontract.InternalServerName(ns), verified against namespace ns's
// CA (Secret podcontract.InternalTLSSecret there). Nothing in the request chooses ns.
type authenticator struct {
	reader client.Reader
	ttl    time.Duration
	now    func() time.Time

	mu  sync.Mutex
	cas map[string]cachedCA
}

type cachedCA struct {
	pool *x509.CertPool
	at   time.Time
}

// namespace verifies the peer's certificate chain and returns the namespace it names.
func (a *authenticator) namespace(ctx context.Context, cs *tls.ConnectionState) (string, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return "", errors.New("a client certificate is required: the pod's internal certificate (" + podcontract.InternalTLSSecret + ")")
	}
	leaf := cs.PeerCertificates[0]
	ns, err := certNamespace(leaf)
	if err != nil {
		return "", err
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	verify := func(pool *x509.CertPool) error {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: podcontract.InternalServerName(ns),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: a.now()})
		return err
	}
	ca, err := a.ca(ctx, ns, false)
	if err != nil {
		return "", err
	}
	if err = verify(ca.pool); err != nil && a.now().Sub(ca.at) >= caRefreshAfter {
		if ca, err = a.ca(ctx, ns, true); err != nil {
			return "", err
		}
		err = verify(ca.pool)
	}
	if err != nil {
		return "", fmt.Errorf("client certificate for namespace %s does not verify against that namespace's CA: %w", ns, err)
	}
	return ns, nil
}

// certNamespace is the namespace of the one internal server name cert carries.
func certNamespace(cert *x509.Certificate) (string, error) {
	suffix := ".ns." + podcontract.InternalDomain
	var found []string
	for _, n := range cert.DNSNames {
		if ns, ok := strings.CutSuffix(n, suffix); ok {
			found = append(found, ns)
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("the client certificate must name exactly one <namespace>%s, it names %d", suffix, len(found))
	}
	if errs := validation.IsDNS1123Label(found[0]); len(errs) > 0 {
		return "", fmt.Errorf("the client certificate names namespace %q, which is no namespace name", found[0])
	}
	return found[0], nil
}

// ca is namespace ns's CA pool, cached for a.ttl (fresh: read it again now).
func (a *authenticator) ca(ctx context.Context, ns string, fresh bool) (cachedCA, error) {
	a.mu.Lock()
	c, ok := a.cas[ns]
	a.mu.Unlock()
	if ok && !fresh && a.now().Sub(c.at) < a.ttl {
		return c, nil
	}
	sec := &corev1.Secret{}
	err := a.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: podcontract.InternalTLSSecret}, sec)
	if client.IgnoreNotFound(err) != nil {
		return cachedCA{}, fmt.Errorf("namespace %s's CA (Secret %s): %w", ns, podcontract.InternalTLSSecret, err)
	}
	// No Secret (or no CA in it) trusts nothing, cached like a CA so that certificates
	// naming made-up namespaces cost one read per caRefreshAfter.
	pool := x509.NewCertPool()
	if b := sec.Data[podcontract.InternalTLSCA]; len(b) > 0 {
		if pool, err = internalca.Pool(b); err != nil {
			return cachedCA{}, fmt.Errorf("namespace %s's CA (Secret %s, key %s): %w", ns, podcontract.InternalTLSSecret, podcontract.InternalTLSCA, err)
		}
	}
	c = cachedCA{pool: pool, at: a.now()}
	a.mu.Lock()
	if a.cas == nil {
		a.cas = map[string]cachedCA{}
	}
	a.cas[ns] = c
	a.mu.Unlock()
	return c, nil
}
