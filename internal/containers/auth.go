package containers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
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
// checked again against a fresh read, so a renewed CA is picked up at once. A namespace
// found without a CA is not read again for as long.
const caRefreshAfter = 5 * time.Second

// Anyone on the pod network completes the handshake (ServerTLSConfig) and may name any
// namespace; these bound what certificates naming namespaces without a CA cost.
const (
	// maxMissingCAs caps the remembered namespaces without a CA.
	maxMissingCAs = 256
	// missingReadBurst and missingReadEvery bound the Secret reads for namespaces not
	// known to have a CA (a token bucket); a known one's refresh is not counted, so a
	// flood of made-up names does not lock out namespaces that run instances.
	missingReadBurst = 32
	missingReadEvery = time.Second
)

// authenticator finds the caller's namespace from its client certificate: the one DNS
// name of the form podcontract.InternalServerName(ns), verified against namespace ns's
// CA (Secret podcontract.InternalTLSSecret there). Nothing in the request chooses ns.
type authenticator struct {
	reader client.Reader
	ttl    time.Duration
	now    func() time.Time

	mu sync.Mutex
	// cas are the namespaces whose Secret holds a CA: as many as the cluster has.
	cas map[string]cachedCA
	// missing are namespaces read without a CA, and when (at most maxMissingCAs).
	missing map[string]time.Time
	// tokens and filled are the bucket of reads for namespaces not in cas.
	tokens float64
	filled time.Time
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

// ca is namespace ns's CA pool, cached for a.ttl (fresh: read it again now). A
// namespace without one gets an empty pool, which trusts nothing.
func (a *authenticator) ca(ctx context.Context, ns string, fresh bool) (cachedCA, error) {
	if c, ok, err := a.cached(ns, fresh); ok || err != nil {
		return c, err
	}
	sec := &corev1.Secret{}
	err := a.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: podcontract.InternalTLSSecret}, sec)
	if client.IgnoreNotFound(err) != nil {
		return cachedCA{}, fmt.Errorf("namespace %s's CA (Secret %s): %w", ns, podcontract.InternalTLSSecret, err)
	}
	b := sec.Data[podcontract.InternalTLSCA]
	if len(b) == 0 {
		now := a.now()
		a.mu.Lock()
		delete(a.cas, ns)
		a.rememberMissing(ns, now)
		a.mu.Unlock()
		return cachedCA{pool: x509.NewCertPool(), at: now}, nil
	}
	pool, err := internalca.Pool(b)
	if err != nil {
		return cachedCA{}, fmt.Errorf("namespace %s's CA (Secret %s, key %s): %w", ns, podcontract.InternalTLSSecret, podcontract.InternalTLSCA, err)
	}
	c := cachedCA{pool: pool, at: a.now()}
	a.mu.Lock()
	if a.cas == nil {
		a.cas = map[string]cachedCA{}
	}
	a.cas[ns] = c
	delete(a.missing, ns)
	a.mu.Unlock()
	return c, nil
}

// cached answers from the cache (ok) when it can: ns's CA while fresh enough, an empty
// pool while ns is remembered without one; a read for a namespace not known to have a
// CA must take a token first, else the caller is told to come back (503).
func (a *authenticator) cached(ns string, fresh bool) (cachedCA, bool, error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.cas[ns]; ok {
		return c, !fresh && now.Sub(c.at) < a.ttl, nil
	}
	if at, ok := a.missing[ns]; ok && now.Sub(at) < caRefreshAfter {
		return cachedCA{pool: x509.NewCertPool(), at: at}, true, nil
	}
	if a.filled.IsZero() {
		a.tokens = missingReadBurst
	} else {
		a.tokens = min(missingReadBurst, a.tokens+float64(now.Sub(a.filled))/float64(missingReadEvery))
	}
	a.filled = now
	if a.tokens < 1 {
		return cachedCA{}, false, errorf(http.StatusServiceUnavailable,
			"too many client certificates of namespaces without a known CA: try again in a few seconds")
	}
	a.tokens--
	return cachedCA{}, false, nil
}

// rememberMissing records that ns has no CA, dropping expired records when full; when
// all are current the record is skipped (the token bucket still bounds the reads).
// Called with a.mu held.
func (a *authenticator) rememberMissing(ns string, now time.Time) {
	if a.missing == nil {
		a.missing = map[string]time.Time{}
	}
	if len(a.missing) >= maxMissingCAs {
		for k, at := range a.missing {
			if now.Sub(at) >= caRefreshAfter {
				delete(a.missing, k)
			}
		}
	}
	if len(a.missing) < maxMissingCAs {
		a.missing[ns] = now
	}
}
