package devcluster

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"
)

// TestEtcdNeedsClientCertificate: the cluster's etcd, on a loopback every pod shares,
// answers only a client presenting a certificate of the cluster's CA, as a real
// control plane's etcd (https://etcd.io/docs/v3.5/op-guide/security/): a caller without
// one cannot read the cluster's Secrets.
func TestEtcdNeedsClientCertificate(t *testing.T) {
	if cluster.etcdURL == "" {
		t.Fatal("no etcd URL")
	}
	pool := x509.NewCertPool()
	pool.AddCert(cluster.pki.caCert)
	anonymous := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if r, err := anonymous.Get(cluster.etcdURL + "/health"); err == nil {
		r.Body.Close()
		t.Errorf("etcd answered a client without a certificate: %s", r.Status)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if r, err := plain.Get("http" + cluster.etcdURL[len("https"):] + "/health"); err == nil && r.StatusCode == http.StatusOK {
		r.Body.Close()
		t.Error("etcd answered plain HTTP")
	}
	hc, err := cluster.pki.etcdHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	r, err := hc.Get(cluster.etcdURL + "/health")
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("etcd with the API server's client certificate: %v %v", r, err)
	}
	r.Body.Close()
}
