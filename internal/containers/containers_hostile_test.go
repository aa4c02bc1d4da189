package containers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// countingReader counts the Secret reads an unauthenticated caller causes.
type countingReader struct {
	client.Reader
	gets atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestHostileAuthCacheGrowsWithoutBound: anyone who reaches port 9446 (the handshake
// takes any client certificate, ServerTLSConfig) presents self-signed certificates
// naming made-up namespaces. Each name costs the manager one uncached Secret read
// against the API server and a cache entry that is never evicted.
func TestHostileAuthCacheGrowsWithoutBound(t *testing.T) {
	r := &countingReader{Reader: fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build()}
	a := &authenticator{reader: r, ttl: DefaultCATTL, now: time.Now}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		name := fmt.Sprintf("made-up-%d.ns.%s", i, podcontract.InternalDomain)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 1)), Subject: pkix.Name{CommonName: name},
			DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		if _, err := a.namespace(context.Background(), &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}); err == nil {
			t.Fatal("a self-signed certificate authenticated")
		}
	}
	a.mu.Lock()
	cached := len(a.cas) + len(a.missing)
	a.mu.Unlock()
	const bound = 256
	if cached > bound {
		t.Errorf("%d unauthenticated certificates left %d CA cache entries (unbounded; want at most %d)", n, cached, bound)
	}
	if g := r.gets.Load(); g > bound {
		t.Errorf("%d unauthenticated certificates caused %d Secret reads of the API server (want at most %d)", n, g, bound)
	}
}

func hostileDONS(maxInstances int32) *fleetv1alpha1.DurableObjectNamespace {
	return &fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rooms", UID: "dons-uid"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "chat"}, ClassName: "Room",
			Container: &fleetv1alpha1.ContainerSpec{Image: "registry.example/app:1", MaxInstances: ptr.To(maxInstances)}}}
}

// TestHostileTerminatingInstancesEscapeMaxInstances: create counts only pods without a
// deletionTimestamp. Stop deletes with the caller's graceSeconds (up to 3600), and a
// container that ignores SIGTERM keeps running (and holding CPU and memory) for all of
// it, uncounted: stop, start another, repeat, and maxInstances bounds nothing. From
// JavaScript alone (signal(15): 10 s) the same cycle overshoots for 10 s at a time.
func TestHostileTerminatingInstancesEscapeMaxInstances(t *testing.T) {
	ctx := context.Background()
	d := hostileDONS(1)
	shard := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rooms-shards-0", UID: "shard-uid", Labels: specs.DONSSelector(d)}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(d, shard).WithStatusSubresource(&corev1.Pod{}).Build()
	s := &Server{Client: c, Log: testr.New(t), Options: specs.DefaultOptions()}
	s.setup()

	// Instance 1 runs, then is stopped with a long grace period: the kubelet keeps it
	// running (the finalizer plays the kubelet's grace period here).
	first := specs.BuildContainerPod(specs.ContainerInstance{DONS: d, ShardPod: shard, Name: "one"}, s.Options)
	first.Finalizers = []string{"hostile.test/grace-period"}
	if _, err := s.create(ctx, d, first); err != nil {
		t.Fatal(err)
	}
	live := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(first), live); err != nil {
		t.Fatal(err)
	}
	live.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.1", ContainerStatuses: []corev1.ContainerStatus{{
		Name: podcontract.ContainerInstanceContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	if err := c.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(ctx, "team-a", InstanceRequest{ShardPod: shard.Name, Name: "one", GraceSeconds: maxGraceSeconds}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(first), live); err != nil || live.DeletionTimestamp == nil {
		t.Fatalf("the stopped instance should still be terminating (running): %v", err)
	}

	second := specs.BuildContainerPod(specs.ContainerInstance{DONS: d, ShardPod: shard, Name: "two"}, s.Options)
	_, err := s.create(ctx, d, second)
	if StatusCode(err) != http.StatusTooManyRequests {
		t.Errorf("maxInstances 1 with one instance still running (terminating, grace %d s): create answered %v; want 429",
			maxGraceSeconds, err)
	}
}

// TestHostileInternetPolicyIgnoresAdminOutbound: an instance started with
// enableInternet (the author's choice) may reach every public address, whatever the
// admin's outbound rules (--outbound-deny, and an allow list without "public") say for
// the same author's Worker pods.
func TestHostileInternetPolicyIgnoresAdminOutbound(t *testing.T) {
	d := hostileDONS(1)
	opts := specs.DefaultOptions()
	opts.Outbound = outbound.Rules{Allow: []string{"10.96.0.0/12"}, Deny: []string{"203.0.113.0/24"}}
	var internet *networkingv1.NetworkPolicy
	for _, np := range specs.BuildContainerNetworkPolicies(d, opts) {
		if np.Name == specs.ContainerInternetPolicyName(d.Name) {
			internet = np
		}
	}
	if internet == nil {
		t.Fatal("no internet policy")
	}
	for _, rule := range internet.Spec.Egress {
		for _, peer := range rule.To {
			if b := peer.IPBlock; b != nil && b.CIDR == "0.0.0.0/0" && !slices.Contains(b.Except, "203.0.113.0/24") {
				t.Errorf("instances with enableInternet may reach 203.0.113.0/24, which the admin denies (--outbound-deny %v); "+
					"and the admin's allow list %v has no \"public\" at all", opts.Outbound.Deny, opts.Outbound.Allow)
			}
		}
	}
}

// TestHostileReuseComparesArgsAsText: reusable compares args and env with fmt.Sprint,
// so ["a b"] and ["a","b"] (or env values holding "} {") look the same, and a start
// with other args reuses a pod running the old ones.
func TestHostileReuseComparesArgsAsText(t *testing.T) {
	d := hostileDONS(5)
	shard := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rooms-shards-0", UID: "shard-uid"}}
	build := func(args, env []string) *corev1.Pod {
		return specs.BuildContainerPod(specs.ContainerInstance{DONS: d, ShardPod: shard, Name: "one", Args: args, Env: env}, specs.DefaultOptions())
	}
	if reusable(build([]string{"--flag a"}, nil), build([]string{"--flag", "a"}, nil)) {
		t.Error(`a pod running args ["--flag a"] is reused for args ["--flag", "a"]`)
	}
	if reusable(build(nil, []string{"A=x nil} {B y"}), build(nil, []string{"A=x", "B=y"})) {
		t.Error(`a pod running env A="x nil} {B y" is reused for env A=x, B=y`)
	}
}

// TestHostileRefusalRevealsNamespaces: the 401 an unauthenticated caller gets differs
// with whether the namespace it names has the internal CA: a certificate whose issuer
// is named like that CA ("workerd-operator namespace <ns>") draws Go's "possibly
// because of ... candidate authority certificate" hint only when the CA exists, so
// anyone on the pod network can tell which namespaces run Workers.
func TestHostileRefusalRevealsNamespaces(t *testing.T) {
	plane, err := internalca.NewPlane("victim")
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "victim", Name: podcontract.InternalTLSSecret}, Data: plane.Namespaces["victim"]}
	a := &authenticator{reader: fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(sec).Build(), ttl: DefaultCATTL, now: time.Now}
	msg := func(ns string) string {
		caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "workerd-operator namespace " + ns},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign}
		caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
		caCert, _ := x509.ParseCertificate(caDER)
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		name := ns + ".ns." + podcontract.InternalDomain
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		leaf, _ := x509.ParseCertificate(der)
		_, err := a.namespace(context.Background(), &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}})
		if err == nil {
			t.Fatal("a forged certificate authenticated")
		}
		return strings.ReplaceAll(err.Error(), ns, "NS")
	}
	if existing, missing := msg("victim"), msg("nobody"); existing != missing {
		t.Errorf("refusals differ with whether the namespace has the CA:\n  existing: %s\n  missing:  %s", existing, missing)
	}
}
