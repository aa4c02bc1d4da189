package sidecar_test

import (
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// dialFrom opens a TCP connection to addr from the loopback address src (Linux routes
// all of 127.0.0.0/8 to lo, so each src is a distinct source to the server).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer waits (up to a safety bound, never reached by a passing test) for c
// to be closed by the server: a read returns EOF or a reset rather than timing out.
func closedByServer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func guardedSidecar(t *testing.T, o sidecar.Options) (string, *internalca.Plane) {
	t.Helper()
	plane, err := internalca.NewPlane("orders")
	if err != nil {
		t.Fatal(err)
	}
	o.Addr, o.DataDir = testenv.FreeLoopbackAddr(t), t.TempDir()
	srv, err2 := sidecar.New(o)
	if err = err2; err != nil {
		t.Fatal(err)
	}
	serveBoth(t, plane, srv)
	return srv.TLSAddr(), plane
}

// One source holding idle connections (no TLS handshake) gets at most
// CrossPodMaxPerSource of them: the next one is closed at once, while another
// source (the kubelet's probe) is still served. Without the cap 19,900 such
// connections exhausted the sidecar's file descriptors.
func TestCrossPodCapsConnectionsPerSource(t *testing.T) {
	addr, plane := guardedSidecar(t, sidecar.Options{CrossPodMaxPerSource: 3, CrossPodMaxConns: 100, CrossPodHandshakeTimeout: time.Hour})
	var held []net.Conn
	for range 3 {
		held = append(held, dialFrom(t, "127.0.0.2", addr))
	}
	extra := dialFrom(t, "127.0.0.2", addr)
	if !closedByServer(extra, 30*time.Second) {
		t.Fatal("the 4th connection of one source stayed open; want it closed past CrossPodMaxPerSource=3")
	}
	if closedByServer(held[0], 100*time.Millisecond) {
		t.Fatal("a connection within the per-source cap was closed")
	}
	if code, err := do(client(t, plane, nil, nil), http.MethodGet, "https://"+addr+"/healthz", ""); err != nil || code != http.StatusOK {
		t.Fatalf("GET /healthz from another source = %d, %v; want 200", code, err)
	}
}

// Past CrossPodMaxConns in all, a new connection is closed at once (shed) rather than
// held: the sidecar's memory and descriptors stay bounded whatever the number of sources.
func TestCrossPodCapsConnections(t *testing.T) {
	addr, _ := guardedSidecar(t, sidecar.Options{CrossPodMaxPerSource: 10, CrossPodMaxConns: 4, CrossPodHandshakeTimeout: time.Hour})
	for _, src := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		dialFrom(t, src, addr)
	}
	if !closedByServer(dialFrom(t, "127.0.0.6", addr), 30*time.Second) {
		t.Fatal("the 5th connection stayed open; want it closed past CrossPodMaxConns=4")
	}
}

// A connection that never starts its TLS handshake is closed after
// CrossPodHandshakeTimeout (workerd's sockets and, before, this one kept them forever).
func TestCrossPodBoundsHandshake(t *testing.T) {
	addr, _ := guardedSidecar(t, sidecar.Options{CrossPodHandshakeTimeout: 50 * time.Millisecond})
	if !closedByServer(dialFrom(t, "127.0.0.2", addr), 30*time.Second) {
		t.Fatal("a connection without a handshake stayed open")
	}
}
