package internalca

import (
	"time"
)

// Plane is a manager CA with its client certificate and the internal TLS Secret data
// of namespaces, for tests and local runs.
type Plane struct {
	Manager                 *CA
	ManagerCert, ManagerKey []byte
	Namespaces              map[string]map[string][]byte
}

// NewPlane makes a manager CA and client certificate and the Secret data of each
// namespace in nss.
func NewPlane(nss ...string) (*Plane, error) {
	now := time.Now()
	mgr, err := New("workerd-operator manager", now)
	if err != nil {
		return nil, err
	}
	p := &Plane{Manager: mgr, Namespaces: map[string]map[string][]byte{}}
	if p.ManagerCert, p.ManagerKey, err = mgr.Issue("workerd-operator manager", nil, now); err != nil {
		return nil, err
	}
	for _, ns := range nss {
		if p.Namespaces[ns], err = NamespaceSecretData(ns, nil, mgr.CertPEM, time.Now); err != nil {
			return nil, err
		}
	}
	return p, nil
}
