package internalca

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Issuer keeps podcontract.InternalTLSSecret in every namespace with workerd pods and
// makes the manager's clients of those pods.
type Issuer struct {
	// Manager is the manager's CA; ManagerCert/ManagerKey its client certificate.
	Manager                 *CA
	ManagerCert, ManagerKey []byte
	// Client reads and writes Secrets directly (not through a cache).
	Client client.Client

	mu      sync.Mutex
	clients map[string]cachedClient // by namespace
}

type cachedClient struct {
	ca []byte
	hc *http.Client
}

// Ensure creates or renews namespace ns's internal TLS Secret and returns its
// resourceVersion (pods hash it, so a renewal rolls them).
func (i *Issuer) Ensure(ctx context.Context, ns string) (string, error) {
	sec := &corev1.Secret{}
	key := types.NamespacedName{Namespace: ns, Name: podcontract.InternalTLSSecret}
	err := i.Client.Get(ctx, key, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("internal TLS Secret %s/%s: %w", ns, key.Name, err)
	}
	data, err := NamespaceSecretData(ns, sec.Data, i.Manager.CertPEM, time.Now)
	if err != nil {
		return "", err
	}
	if sec.ResourceVersion != "" && sameData(sec.Data, data) {
		return sec.ResourceVersion, nil
	}
	sec.ObjectMeta = metav1.ObjectMeta{Name: key.Name, Namespace: ns, ResourceVersion: sec.ResourceVersion,
		Labels: map[string]string{podcontract.LabelName: podcontract.AppName, podcontract.LabelManagedBy: podcontract.ManagedBy}}
	sec.Type, sec.Data = corev1.SecretTypeOpaque, data
	if sec.ResourceVersion == "" {
		err = i.Client.Create(ctx, sec)
	} else {
		err = i.Client.Update(ctx, sec)
	}
	if err != nil {
		return "", fmt.Errorf("internal TLS Secret %s/%s: %w", ns, key.Name, err)
	}
	return sec.ResourceVersion, nil
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if !bytes.Equal(a[k], v) {
			return false
		}
	}
	return true
}

// HTTPClient is the manager's client of namespace ns's pods: it presents the manager's
// certificate and trusts only the namespace's CA. timeout 0: none.
func (i *Issuer) HTTPClient(ctx context.Context, ns string, timeout time.Duration) (*http.Client, error) {
	sec := &corev1.Secret{}
	if err := i.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: podcontract.InternalTLSSecret}, sec); err != nil {
		return nil, fmt.Errorf("internal TLS Secret %s/%s: %w", ns, podcontract.InternalTLSSecret, err)
	}
	ca := sec.Data[podcontract.InternalTLSCA]
	i.mu.Lock()
	defer i.mu.Unlock()
	if c, ok := i.clients[ns]; ok && bytes.Equal(c.ca, ca) {
		return withTimeout(c.hc, timeout), nil
	}
	cfg, err := ClientConfig(i.ManagerCert, i.ManagerKey, ca, ns)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     cfg,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}}
	if i.clients == nil {
		i.clients = map[string]cachedClient{}
	}
	i.clients[ns] = cachedClient{ca: ca, hc: hc}
	return withTimeout(hc, timeout), nil
}

func withTimeout(hc *http.Client, timeout time.Duration) *http.Client {
	c := *hc
	c.Timeout = timeout
	return &c
}

// LoadManager reads the manager's CA and client certificate from Secret
// podcontract.ManagerCASecret in namespace ns, creating it (or renewing the client
// certificate) when needed; c reads and writes directly.
func LoadManager(ctx context.Context, c client.Client, ns string) (*Issuer, error) {
	sec := &corev1.Secret{}
	key := types.NamespacedName{Namespace: ns, Name: podcontract.ManagerCASecret}
	err := c.Get(ctx, key, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("manager CA Secret %s/%s: %w", ns, key.Name, err)
	}
	ca, perr := Parse(sec.Data[podcontract.InternalTLSCA], sec.Data[podcontract.InternalTLSCAKey])
	if perr != nil {
		if ca, err = New("workerd-operator manager", time.Now()); err != nil {
			return nil, err
		}
	}
	is := &Issuer{Manager: ca, Client: c, ManagerCert: sec.Data[podcontract.InternalTLSCert], ManagerKey: sec.Data[podcontract.InternalTLSKey]}
	if perr == nil && ca.Fresh(is.ManagerCert, is.ManagerKey, time.Now()) {
		return is, nil
	}
	if is.ManagerCert, is.ManagerKey, err = ca.Issue("workerd-operator manager", nil, time.Now()); err != nil {
		return nil, err
	}
	sec.ObjectMeta = metav1.ObjectMeta{Name: key.Name, Namespace: ns, ResourceVersion: sec.ResourceVersion}
	sec.Data = map[string][]byte{podcontract.InternalTLSCA: ca.CertPEM, podcontract.InternalTLSCAKey: ca.KeyPEM,
		podcontract.InternalTLSCert: is.ManagerCert, podcontract.InternalTLSKey: is.ManagerKey}
	if sec.ResourceVersion == "" {
		err = c.Create(ctx, sec)
	} else {
		err = c.Update(ctx, sec)
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		return LoadManager(ctx, c, ns) // another replica wrote it first
	}
	return is, err
}
