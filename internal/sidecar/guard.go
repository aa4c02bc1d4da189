package sidecar

import (
	"net"
	"net/netip"
	"sync"
)

// guardListener sheds connections past a total and a per-source-address bound: the
// one past either is closed at once (a blocked Accept would let an attacker's
// connections queue ahead of the kubelet's probes in the backlog). What the Kubernetes
// API server does per client, done here for the sidecar's cross-pod port.
type guardListener struct {
	net.Listener
	max, perSource int

	mu     sync.Mutex
	total  int
	bySrc  map[netip.Addr]int
	onShed func()
}

func newGuardListener(l net.Listener, max, perSource int) *guardListener {
	return &guardListener{Listener: l, max: max, perSource: perSource, bySrc: map[netip.Addr]int{}}
}

// Accept returns the next connection within both bounds, closing the ones past them.
func (l *guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceAddr(c)
		if l.admit(src) {
			return &guardConn{Conn: c, release: func() { l.release(src) }}, nil
		}
		_ = c.Close()
	}
}

func (l *guardListener) admit(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max || l.bySrc[src] >= l.perSource {
		if l.onShed != nil {
			l.onShed()
		}
		return false
	}
	l.total++
	l.bySrc[src]++
	return true
}

func (l *guardListener) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.bySrc[src]--; l.bySrc[src] <= 0 {
		delete(l.bySrc, src)
	}
}

// sourceAddr is c's remote address in one form (IPv4-mapped IPv6 unmapped), so one
// source cannot count twice under two spellings.
func sourceAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

type guardConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *guardConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// settle takes the connection out of the listener's bounds while it stays open: the
// bounds then count only connections that have not settled (a relay's unauthenticated
// ones). Close does not release it again.
func (c *guardConn) settle() { c.once.Do(c.release) }
