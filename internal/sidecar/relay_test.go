package sidecar_test

import (
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// echoUpstream stands where workerd's loopback socket is: it echoes and counts the
// connections that reach it.
func echoUpstream(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", testenv.FreeLoopbackAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return l.Addr().String(), &n
}

// relay fronts an echo upstream with the "orders" namespace's certificate, trusting
// the CA in file trusted.
func relay(t *testing.T, plane *internalca.Plane, trusted string, o sidecar.RelayOptions) (string, *atomic.Int32) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if err := internalca.WriteFiles(dir, plane.Namespaces["orders"]); err != nil {
		t.Fatal(err)
	}
	cfg, err := internalca.SocketConfig(dir, trusted)
	if err != nil {
		t.Fatal(err)
	}
	up, reached := echoUpstream(t)
	r, err := sidecar.ListenRelay(testenv.FreeLoopbackAddr(t), up, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Serve() }()
	t.Cleanup(func() { _ = r.Close() })
	return r.Addr().String(), reached
}

// handshake completes mutual TLS over c presenting cert/key of namespace ns's plane.
func handshake(t *testing.T, plane *internalca.Plane, c net.Conn, cert, key []byte) (*tls.Conn, error) {
	t.Helper()
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := internalca.Pool(plane.Namespaces["orders"][podcontract.InternalTLSCA])
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: podcontract.InternalServerName("orders"), RootCAs: pool, Certificates: []tls.Certificate{pair}})
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	err = tc.Handshake()
	if err == nil { // a refused certificate shows on the first read in TLS 1.3
		_, err = echo(tc)
	}
	return tc, err
}

func echo(c net.Conn) (string, error) {
	if _, err := c.Write([]byte("ping")); err != nil {
		return "", err
	}
	b := make([]byte, 4)
	_, err := io.ReadFull(c, b)
	return string(b), err
}

// The relay's bounds on connections not yet authenticated: a source past its cap and
// connections past the total are closed at once while other sources are relayed; a connection that never starts (or never
// finishes) the handshake is closed at the handshake timeout and never reaches
// workerd. Without them 12,249 idle connections exhausted workerd's descriptors.
func TestRelayBoundsUnauthenticatedConnections(t *testing.T) {
	plane, err := internalca.NewPlane("orders", "billing")
	if err != nil {
		t.Fatal(err)
	}
	orders := plane.Namespaces["orders"]
	tests := []struct {
		name           string
		o              sidecar.RelayOptions
		hold           map[string]int // source address -> idle connections held first
		from           string
		wantShed       bool
		wantClosedIdle time.Duration // > 0: a held connection is closed by then
	}{
		{"per source cap", sidecar.RelayOptions{MaxPendingPerSource: 3, MaxPending: 100, HandshakeTimeout: time.Hour},
			map[string]int{"127.0.0.2": 3}, "127.0.0.2", true, 0},
		{"other source within caps", sidecar.RelayOptions{MaxPendingPerSource: 3, MaxPending: 100, HandshakeTimeout: time.Hour},
			map[string]int{"127.0.0.2": 3}, "127.0.0.3", false, 0},
		{"total cap", sidecar.RelayOptions{MaxPendingPerSource: 3, MaxPending: 4, HandshakeTimeout: time.Hour},
			map[string]int{"127.0.0.2": 2, "127.0.0.4": 2}, "127.0.0.3", true, 0},
		{"handshake timeout", sidecar.RelayOptions{HandshakeTimeout: 300 * time.Millisecond},
			map[string]int{"127.0.0.2": 1}, "127.0.0.3", false, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, reached := relay(t, plane, podcontract.InternalTLSCA, tt.o)
			var held []net.Conn
			for src, n := range tt.hold {
				for range n {
					held = append(held, dialFrom(t, src, addr))
				}
			}
			time.Sleep(100 * time.Millisecond) // the relay has accepted them
			c := dialFrom(t, tt.from, addr)
			if tt.wantShed {
				if !closedByServer(c, 3*time.Second) {
					t.Fatal("connection past the cap was not closed")
				}
			} else if _, err := handshake(t, plane, c, orders[podcontract.InternalTLSCert], orders[podcontract.InternalTLSKey]); err != nil {
				t.Fatalf("authenticated connection within the caps: %v", err)
			}
			if tt.wantClosedIdle > 0 && !closedByServer(held[0], tt.wantClosedIdle) {
				t.Fatal("a connection without a handshake outlived the handshake timeout")
			}
			want := int32(1)
			if tt.wantShed {
				want = 0
			}
			if got := reached.Load(); got != want {
				t.Errorf("upstream reached by %d connections, want %d (only authenticated ones)", got, want)
			}
		})
	}
}

// Each fronted socket trusts one CA, as workerd's requireClientCerts did: rpc and
// gateway the namespace's (another namespace's certificate is refused), trigger the
// manager's (a pod's certificate is refused).
func TestRelayRequiresTheSocketsCA(t *testing.T) {
	plane, err := internalca.NewPlane("orders", "billing")
	if err != nil {
		t.Fatal(err)
	}
	orders, billing := plane.Namespaces["orders"], plane.Namespaces["billing"]
	tests := []struct {
		name      string
		trusted   string
		cert, key []byte
		wantOK    bool
	}{
		{"rpc: own namespace", podcontract.InternalTLSCA, orders[podcontract.InternalTLSCert], orders[podcontract.InternalTLSKey], true},
		{"rpc: other namespace", podcontract.InternalTLSCA, billing[podcontract.InternalTLSCert], billing[podcontract.InternalTLSKey], false},
		{"rpc: manager", podcontract.InternalTLSCA, plane.ManagerCert, plane.ManagerKey, false},
		{"trigger: manager", podcontract.InternalTLSManagerCA, plane.ManagerCert, plane.ManagerKey, true},
		{"trigger: pod", podcontract.InternalTLSManagerCA, orders[podcontract.InternalTLSCert], orders[podcontract.InternalTLSKey], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, reached := relay(t, plane, tt.trusted, sidecar.RelayOptions{})
			c := dialFrom(t, "127.0.0.2", addr)
			tc, err := handshake(t, plane, c, tt.cert, tt.key)
			if (err == nil) != tt.wantOK {
				t.Fatalf("handshake error %v, want ok=%v", err, tt.wantOK)
			}
			if !tt.wantOK && reached.Load() != 0 {
				t.Error("a refused client reached the upstream")
			}
			if tt.wantOK {
				if got, err := echo(tc); err != nil || got != "ping" {
					t.Errorf("relayed echo %q, %v", got, err)
				}
			}
		})
	}
}

// Authenticated connections are not capped per source (a Worker pod holds one to a
// shard's gateway per WebSocket it relays to a Durable Object), only in all: past
// MaxConns the next authenticated one is closed without reaching workerd, and one that
// ends frees its place.
func TestRelayCapsAuthenticatedConnectionsInAll(t *testing.T) {
	plane, err := internalca.NewPlane("orders")
	if err != nil {
		t.Fatal(err)
	}
	orders := plane.Namespaces["orders"]
	const perSource, total = 2, 8
	addr, reached := relay(t, plane, podcontract.InternalTLSCA, sidecar.RelayOptions{MaxPendingPerSource: perSource, MaxConns: total})
	var open []net.Conn
	for i := range total {
		tc, err := handshake(t, plane, dialFrom(t, "127.0.0.2", addr), orders[podcontract.InternalTLSCert], orders[podcontract.InternalTLSKey])
		if err != nil {
			t.Fatalf("authenticated connection %d of one source (pending cap %d): %v", i+1, perSource, err)
		}
		open = append(open, tc)
	}
	if _, err := handshake(t, plane, dialFrom(t, "127.0.0.3", addr), orders[podcontract.InternalTLSCert], orders[podcontract.InternalTLSKey]); err == nil {
		t.Fatalf("authenticated connection %d relayed past MaxConns %d", total+1, total)
	}
	if got := reached.Load(); got != total {
		t.Errorf("upstream reached by %d connections, want %d", got, total)
	}
	_ = open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := handshake(t, plane, dialFrom(t, "127.0.0.3", addr), orders[podcontract.InternalTLSCert], orders[podcontract.InternalTLSKey])
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a place freed by a closed connection was not given again: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
