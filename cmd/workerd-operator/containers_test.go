package main

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// TestContainersServingCert: the containers API's certificate is the manager CA's, for
// both names of the Service, kept until it nears expiry and issued again then.
func TestContainersServingCert(t *testing.T) {
	ca, err := internalca.New("manager", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	names := []string{podcontract.ContainersAPIShortHost("ops"), podcontract.ContainersAPIHost("ops", "cluster.local")}
	s := &servingCert{ca: ca, names: names}
	c1, err := s.get(nil)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, n := range append(names, "workerd-operator-containers.ops.svc.cluster.local") {
		if _, err := c1.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: n}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if c2, _ := s.get(nil); c2 != c1 {
		t.Error("a fresh certificate was issued again")
	}
	c1.Leaf.NotAfter = time.Now().Add(internalca.RenewBefore / 2)
	if c3, _ := s.get(nil); c3 == c1 {
		t.Error("a certificate near its expiry was kept")
	}
}

// TestContainersFlags: the API listens on podcontract.ContainersAPIPort unless told
// otherwise; 0 disables it.
func TestContainersFlags(t *testing.T) {
	cmd := newManagerCommand()
	if got := cmd.Flags().Lookup("containers-bind-address").DefValue; got != ":9446" {
		t.Errorf("default %q", got)
	}
	if err := (&containersFlags{bindAddress: "0"}).setup(nil, nil); err != nil {
		t.Errorf("disabled: %v", err)
	}
}
