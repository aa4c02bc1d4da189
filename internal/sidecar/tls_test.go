package sidecar_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// tlsSidecar serves a sidecar of namespace "orders" on a loopback and a cross-pod
// listener; the /workflows/ handler records the paths that reach it.
func tlsSidecar(t *testing.T, plane *internalca.Plane) (srv *sidecar.Server, reached *[]string) {
	t.Helper()
	srv = newSidecar(t)
	reached = &[]string{}
	srv.Handle("/workflows", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*reached = append(*reached, r.URL.Path)
		_, _ = io.WriteString(w, "cached")
	}))
	serveBoth(t, plane, srv)
	return srv, reached
}

func newSidecar(t *testing.T) *sidecar.Server {
	t.Helper()
	srv, err := sidecar.New(sidecar.Options{Addr: testenv.FreeLoopbackAddr(t), DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// serveBoth serves srv on a loopback and a cross-pod listener of namespace "orders".
func serveBoth(t *testing.T, plane *internalca.Plane, srv *sidecar.Server) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if err := internalca.WriteFiles(dir, plane.Namespaces["orders"]); err != nil {
		t.Fatal(err)
	}
	cfg, err := internalca.ServerConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := srv.ListenTLS(testenv.FreeLoopbackAddr(t), cfg); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	go func() { _ = srv.ServeTLS() }()
	t.Cleanup(func() { _ = srv.Close() })
}

// client is an HTTPS client presenting cert/key (none when nil) and trusting the
// "orders" namespace's CA.
func client(t *testing.T, plane *internalca.Plane, cert, key []byte) *http.Client {
	t.Helper()
	cfg := &tls.Config{ServerName: podcontract.InternalServerName("orders")}
	pool, err := internalca.Pool(plane.Namespaces["orders"][podcontract.InternalTLSCA])
	if err != nil {
		t.Fatal(err)
	}
	cfg.RootCAs = pool
	if cert != nil {
		c, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

func do(hc *http.Client, method, url, body string) (int, error) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.ReadAll(res.Body)
	return res.StatusCode, nil
}

// A forged step result (POST /workflows/_run/attempt) is refused on the cross-pod
// listener, even with a certificate of the pod's own namespace; only the pod itself
// (the loopback listener, where the runner calls) reaches the engine with it.
func TestCrossPodRefusesRunnerPaths(t *testing.T) {
	plane, err := internalca.NewPlane("orders")
	if err != nil {
		t.Fatal(err)
	}
	srv, reached := tlsSidecar(t, plane)
	ns := plane.Namespaces["orders"]
	forged := `{"runId":"r1","ok":true,"result":{"charged":true}}`
	for _, who := range []struct {
		name      string
		cert, key []byte
	}{
		{"no certificate", nil, nil},
		{"a certificate of the namespace", ns[podcontract.InternalTLSCert], ns[podcontract.InternalTLSKey]},
		{"the manager's certificate", plane.ManagerCert, plane.ManagerKey},
	} {
		for _, p := range []string{"/workflows/_run/attempt", "/workflows/_run/step", "/channels/v1/objects/orders/o/publish"} {
			code, err := do(client(t, plane, who.cert, who.key), "POST", "https://"+srv.TLSAddr()+p, forged)
			if err != nil || code != http.StatusForbidden {
				t.Errorf("%s: POST %s across pods: %d %v, want 403", who.name, p, code, err)
			}
		}
	}
	if len(*reached) != 0 {
		t.Fatalf("the engine saw %v from across pods", *reached)
	}
	if code, err := do(http.DefaultClient, "POST", "http://"+srv.Addr()+"/workflows/_run/attempt", forged); err != nil || code != 200 {
		t.Fatalf("the runner's own POST over the loopback listener: %d %v", code, err)
	}
}

// sendEvent from another namespace is refused (its certificate is signed by another
// CA); from the namespace and from the manager it reaches the engine;
// without a certificate it is 401. Probes need no certificate.
func TestCrossPodEventNeedsNamespaceCertificate(t *testing.T) {
	plane, err := internalca.NewPlane("orders", "other")
	if err != nil {
		t.Fatal(err)
	}
	srv, reached := tlsSidecar(t, plane)
	url := "https://" + srv.TLSAddr() + "/workflows/orders/instances/o1/events"
	event := `{"type":"payment-received","payload":{"amount":0}}`
	other := plane.Namespaces["other"]
	// Go's client does not even send a certificate the server's CA list does not name.
	if code, err := do(client(t, plane, other[podcontract.InternalTLSCert], other[podcontract.InternalTLSKey]), "POST", url, event); err == nil && code != http.StatusUnauthorized {
		t.Errorf("another namespace's certificate: %d, want a handshake failure or 401", code)
	}
	if code, err := do(client(t, plane, nil, nil), "POST", url, event); err != nil || code != http.StatusUnauthorized {
		t.Errorf("no certificate: %d %v, want 401", code, err)
	}
	if len(*reached) != 0 {
		t.Fatalf("the engine saw %v from outside the namespace", *reached)
	}
	ns := plane.Namespaces["orders"]
	for _, c := range [][2][]byte{{ns[podcontract.InternalTLSCert], ns[podcontract.InternalTLSKey]}, {plane.ManagerCert, plane.ManagerKey}} {
		if code, err := do(client(t, plane, c[0], c[1]), "POST", url, event); err != nil || code != 200 {
			t.Errorf("POST events with a trusted certificate: %d %v", code, err)
		}
	}
	if code, err := do(client(t, plane, nil, nil), "GET", "https://"+srv.TLSAddr()+"/healthz", ""); err != nil || code != 200 {
		t.Errorf("GET /healthz without a certificate: %d %v", code, err)
	}
}

// A request in flight on the cross-pod listener when Shutdown begins finishes before
// the OnShutdown hooks run (they close what requests use: the Workflows engine's store),
// whatever the order of OnShutdown and ListenTLS.
func TestShutdownFinishesCrossPodRequestsBeforeHooks(t *testing.T) {
	plane, err := internalca.NewPlane("orders")
	if err != nil {
		t.Fatal(err)
	}
	srv := newSidecar(t)
	var handlerDone, doneAtHook atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	srv.Handle("/workflows", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		handlerDone.Store(true)
		_, _ = io.WriteString(w, "created")
	}))
	srv.OnShutdown(func(context.Context) error { doneAtHook.Store(handlerDone.Load()); return nil })
	serveBoth(t, plane, srv)
	ns := plane.Namespaces["orders"]
	hc := client(t, plane, ns[podcontract.InternalTLSCert], ns[podcontract.InternalTLSKey])
	got := make(chan int, 1)
	go func() {
		code, _ := do(hc, "POST", "https://"+srv.TLSAddr()+"/workflows/orders/instances", "{}")
		got <- code
	}()
	<-entered
	go func() { time.Sleep(sidecar.LameDuck + 300*time.Millisecond); close(release) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if !doneAtHook.Load() {
		t.Errorf("an OnShutdown hook ran while a cross-pod request was still in flight")
	}
	if code := <-got; code != http.StatusOK {
		t.Errorf("the request in flight got %d, want 200", code)
	}
}

// OnDrain hooks run while the pod-internal listener still serves (the Workflows runner
// reports its attempts in flight there), and before the OnShutdown hooks.
func TestShutdownDrainHooksRunWhileServing(t *testing.T) {
	plane, err := internalca.NewPlane("orders")
	if err != nil {
		t.Fatal(err)
	}
	srv, reached := tlsSidecar(t, plane)
	var order []string
	srv.OnShutdown(func(context.Context) error { order = append(order, "shutdown"); return nil })
	srv.OnDrain(func(context.Context) error {
		code, err := do(http.DefaultClient, "POST", "http://"+srv.Addr()+"/workflows/_run/attempt", "{}")
		order = append(order, fmt.Sprintf("drain: %d %v", code, err))
		return nil
	})
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"drain: 200 <nil>", "shutdown"}; fmt.Sprint(order) != fmt.Sprint(want) || len(*reached) != 1 {
		t.Errorf("hooks %q (handler reached %d times), want %q and the handler reached once", order, len(*reached), want)
	}
}

// The sidecar's /metrics on the pod IP answers only a client certificate of the
// namespace or the manager (as the manager's own /metrics answers only authenticated
// callers); /healthz stays open for the kubelet's probes.
func TestCrossPodMetricsNeedCertificate(t *testing.T) {
	plane, err := internalca.NewPlane("orders")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := tlsSidecar(t, plane)
	srv.Handle(backup.StatusPrefix, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") }))
	for _, path := range []string{"/metrics", backup.StatusPath} {
		url := "https://" + srv.TLSAddr() + path
		if code, err := do(client(t, plane, nil, nil), "GET", url, ""); err != nil || code != http.StatusUnauthorized {
			t.Errorf("GET %s without a certificate: %d %v, want 401", path, code, err)
		}
		ns := plane.Namespaces["orders"]
		for _, c := range [][2][]byte{{ns[podcontract.InternalTLSCert], ns[podcontract.InternalTLSKey]}, {plane.ManagerCert, plane.ManagerKey}} {
			if code, err := do(client(t, plane, c[0], c[1]), "GET", url, ""); err != nil || code != 200 {
				t.Errorf("GET %s with a trusted certificate: %d %v, want 200", path, code, err)
			}
		}
		if code, err := do(http.DefaultClient, "GET", "http://"+srv.Addr()+path, ""); err != nil || code != 200 {
			t.Errorf("GET %s over the loopback listener: %d %v, want 200", path, code, err)
		}
	}
	other := "https://" + srv.TLSAddr() + backup.StatusPrefix + "other"
	if code, err := do(client(t, plane, plane.ManagerCert, plane.ManagerKey), "GET", other, ""); err != nil || code != http.StatusForbidden {
		t.Errorf("GET %s across pods: %d %v, want 403", other, code, err)
	}
}
