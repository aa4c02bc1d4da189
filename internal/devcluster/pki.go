package devcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// pki holds the cluster's generated certificates: one CA signs the API server's and the
// node's serving certificates and the admin client certificate. All files are PEM under
// <dir>/pki.
type pki struct {
	dir      string
	caCert   *x509.Certificate
	caKey    crypto.Signer
	serial   int64 // leaf certificates take the serials after it
	CAFile   string
	CAKey    string
	SAKey    string // service-account signing key (RSA, PEM)
	SAPub    string // its public key
	APICert  string // kube-apiserver serving cert (127.0.0.1, kubernetes.default.svc...)
	APIKey   string
	NodeCert string // virtual-kubelet serving cert (127.0.0.1)
	NodeKey  string
	Admin    string // admin client cert (O=system:masters)
	AdminKey string
	// EtcdCert serves etcd's client and peer URLs (127.0.0.1) and is its peer client
	// certificate; EtcdClient is kube-apiserver's client certificate for etcd.
	EtcdCert, EtcdKey         string
	EtcdClient, EtcdClientKey string
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, serial: 2}
	if err := p.makeCA(); err != nil {
		return nil, err
	}
	if err := p.makeServiceAccountKey(); err != nil {
		return nil, err
	}
	var err error
	loop := []net.IP{net.ParseIP("127.0.0.1")}
	if p.APICert, p.APIKey, err = p.issue("apiserver", "kube-apiserver", nil, loop,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if p.NodeCert, p.NodeKey, err = p.issue("node", "system:node:"+NodeName, []string{"system:nodes"}, loop, []string{"localhost", NodeName}, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if p.Admin, p.AdminKey, err = p.issue("admin", "devcluster-admin", []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if p.EtcdCert, p.EtcdKey, err = p.issue("etcd", "etcd", nil, loop, []string{"localhost"}, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if p.EtcdClient, p.EtcdClientKey, err = p.issue("apiserver-etcd-client", "kube-apiserver-etcd-client", nil, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	return p, nil
}

// makeCA generates the self-signed CA (serial 1) that signs every other certificate.
func (p *pki) makeCA() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "workerd-operator devcluster CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	p.caCert, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CAFile, p.CAKey = filepath.Join(p.dir, "ca.crt"), filepath.Join(p.dir, "ca.key")
	return writeCertKey(p.CAFile, p.CAKey, der, key)
}

// makeServiceAccountKey writes the RSA key pair kube-apiserver signs and verifies
// service-account tokens with.
func (p *pki) makeServiceAccountKey() error {
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	p.SAKey, p.SAPub = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.SAKey, keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.SAPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
}

// issue signs a leaf certificate with the CA and writes <name>.crt and <name>.key.
func (p *pki) issue(name, cn string, orgs []string, ips []net.IP, dns []string, usage ...x509.ExtKeyUsage) (string, string, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	p.serial++
	t := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	d, err := x509.CreateCertificate(rand.Reader, t, p.caCert, k.Public(), p.caKey)
	if err != nil {
		return "", "", err
	}
	c, kf := filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	return c, kf, writeCertKey(c, kf, d, k)
}

func writeCertKey(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("devcluster: write %s: %w", certFile, err)
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// etcdHTTPClient presents kube-apiserver's etcd client certificate and trusts the CA.
func (p *pki) etcdHTTPClient() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(p.EtcdClient, p.EtcdClientKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}
