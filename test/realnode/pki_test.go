package realnode

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
)

// pki is the node's certificates, under <dir>/pki: one CA signs every serving and client
// certificate; an RSA key pair signs service-account tokens.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  crypto.Signer
	serial int64
	CA     string
	CAKey  string
	SAKey  string
	SAPub  string
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, serial: 1}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "workerd-operator realnode CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CA, p.CAKey = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := writePair(p.CA, p.CAKey, der, key); err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	p.SAKey, p.SAPub = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	kp, err := keyutil.MarshalPrivateKeyToPEM(sa)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.SAKey, kp, 0o600); err != nil {
		return nil, err
	}
	return p, os.WriteFile(p.SAPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// issue writes <name>.crt and <name>.key, a certificate for cn/orgs (a client
// certificate when ips and dns are empty, else a serving one).
func (p *pki) issue(name, cn string, orgs []string, ips []net.IP, dns []string) (string, string, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	p.serial++
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if len(ips)+len(dns) > 0 {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	t := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage, IPAddresses: ips, DNSNames: dns,
	}
	d, err := x509.CreateCertificate(rand.Reader, t, p.ca, k.Public(), p.caKey)
	if err != nil {
		return "", "", err
	}
	c, kf := filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	return c, kf, writePair(c, kf, d, k)
}

// kubeconfig writes <dir>/<name>.kubeconfig for a client certificate of cn/orgs.
func (p *pki) kubeconfig(name, server, cn string, orgs ...string) (string, error) {
	crt, key, err := p.issue(name, cn, orgs, nil, nil)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["realnode"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.CA}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: crt, ClientKey: key}
	cfg.Contexts["realnode"] = &clientcmdapi.Context{Cluster: "realnode", AuthInfo: name}
	cfg.CurrentContext = "realnode"
	f := filepath.Join(p.dir, name+".kubeconfig")
	return f, clientcmd.WriteToFile(*cfg, f)
}

func writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}
