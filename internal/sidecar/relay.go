package sidecar

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// RelayOptions bound a Relay; zero fields take the cross-pod listener's defaults
// (limits.go), so the sidecar's pod-IP ports share one set of caps.
type RelayOptions struct {
	MaxConns, MaxPerSource int
	// HandshakeTimeout bounds the TLS handshake from the accept.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a relayed connection with no byte either way for this long.
	IdleTimeout time.Duration
}

// Relay fronts one of workerd's cross-pod sockets (podcontract.FrontedSockets), which
// workerd keeps open forever without a handshake: it owns the pod IP's port, sheds
// connections past the caps (guardListener), terminates mutual TLS within the
// handshake timeout (a client certificate verified against the socket's CA is
// required) and then copies bytes to workerd's loopback socket until either side
// closes or the connection idles. workerd thus holds only authenticated connections.
type Relay struct {
	l       *guardListener
	tls     *tls.Config
	target  string
	o       RelayOptions
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
	dialer  net.Dialer
	handled sync.WaitGroup
}

// ListenRelay binds addr and relays to target, terminating TLS with cfg (its client
// certificate requirement is enforced whatever cfg says).
func ListenRelay(addr, target string, cfg *tls.Config, o RelayOptions) (*Relay, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sidecar: relay %s: %w", addr, err)
	}
	o.MaxConns = cmp.Or(o.MaxConns, DefaultCrossPodMaxConns)
	o.MaxPerSource = cmp.Or(o.MaxPerSource, DefaultCrossPodMaxPerSource)
	o.HandshakeTimeout = cmp.Or(o.HandshakeTimeout, DefaultCrossPodHandshakeTimeout)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, DefaultRelayIdleTimeout)
	cfg = cfg.Clone()
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	return &Relay{l: newGuardListener(l, o.MaxConns, o.MaxPerSource), tls: cfg, target: target, o: o,
		conns: map[net.Conn]struct{}{}}, nil
}

// Addr is the bound address.
func (r *Relay) Addr() net.Addr { return r.l.Addr() }

// Serve relays connections until Close.
func (r *Relay) Serve() error {
	for {
		c, err := r.l.Accept()
		if err != nil {
			if r.isClosed() {
				return nil
			}
			return err
		}
		if !r.track(c) {
			_ = c.Close()
			return nil
		}
		r.handled.Add(1)
		go r.handle(c)
	}
}

// Close stops the listener and closes every connection.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	conns := r.conns
	r.conns = map[net.Conn]struct{}{}
	r.mu.Unlock()
	err := r.l.Close()
	for c := range conns {
		_ = c.Close()
	}
	r.handled.Wait()
	return err
}

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	_ = c.Close()
}

func (r *Relay) handle(raw net.Conn) {
	defer r.handled.Done()
	defer r.untrack(raw)
	c, err := r.open(raw)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.o.HandshakeTimeout)
	up, err := r.dialer.DialContext(ctx, "tcp", r.target)
	cancel()
	if err != nil {
		return
	}
	defer up.Close()
	pipe(c, up, r.o.IdleTimeout)
}

// open completes the handshake within the handshake timeout (the first byte included:
// a connection that never speaks is closed), then clears the deadline.
func (r *Relay) open(raw net.Conn) (net.Conn, error) {
	_ = raw.SetDeadline(time.Now().Add(r.o.HandshakeTimeout))
	c := tls.Server(raw, r.tls)
	if err := c.Handshake(); err != nil {
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return c, nil
}

// pipe copies both ways until one side ends or no byte moved for idle; then both close.
func pipe(a, b net.Conn, idle time.Duration) {
	stop := func() { _ = a.Close(); _ = b.Close() }
	t := time.AfterFunc(idle, stop)
	defer t.Stop()
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.CopyBuffer(dst, activity{src, t, idle}, make([]byte, 32<<10))
		stop()
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

// activity pushes the idle timer back on every read.
type activity struct {
	r    io.Reader
	t    *time.Timer
	idle time.Duration
}

func (a activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.t.Reset(a.idle)
	}
	return n, err
}
