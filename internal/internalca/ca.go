// Package internalca issues the certificates of the internal plane
// (docs/security-internal-plane.md): a self-signed CA per namespace whose one
// certificate (server and client) every workerd pod of the namespace presents, and the
// manager's CA and client certificate. A CA trusts nothing but what it signed, so a pod
// of another namespace, holding another CA's certificate, is refused at the handshake.
package internalca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

const (
	// CAValidity is how long a CA is valid.
	CAValidity = 10 * 365 * 24 * time.Hour
	// CertValidity is how long an issued certificate is valid.
	CertValidity = 365 * 24 * time.Hour
	// RenewBefore: a certificate with less validity left is reissued.
	RenewBefore = 30 * 24 * time.Hour
)

// CA is a certificate authority with its key.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// New makes a self-signed CA named cn (ECDSA P-256).
func New(cn string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"workerd-operator"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return Parse(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
}

// Parse reads a CA from PEM (as New wrote it).
func Parse(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, err
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("internalca: CA key: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("internalca: CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("internalca: CA key does not match the CA certificate")
	}
	return &CA{Cert: cert, key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// ParseCert reads the first certificate of a PEM text.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("internalca: no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// Issue issues a certificate named cn for dnsNames, valid for TLS servers and clients,
// and returns it and its key in PEM.
func (ca *CA) Issue(cn string, dnsNames []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"workerd-operator"}},
		DNSNames:     dnsNames,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// Fresh reports whether certPEM parses, was signed by ca and is valid past now+RenewBefore.
func (ca *CA) Fresh(certPEM, keyPEM []byte, now time.Time) bool {
	cert, err := ParseCert(certPEM)
	if err != nil || cert.CheckSignatureFrom(ca.Cert) != nil || now.Add(RenewBefore).After(cert.NotAfter) {
		return false
	}
	_, err = tls.X509KeyPair(certPEM, keyPEM)
	return err == nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
