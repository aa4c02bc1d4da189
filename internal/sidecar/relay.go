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

// RelayOptions bound a Relay; zero fields take the defaults (limits.go).
type RelayOptions struct {
	// MaxPending and MaxPendingPerSource bound the connections that have not yet
	// completed the TLS handshake, in all and per source address.
	MaxPending, MaxPendingPerSource int
	// HandshakeTimeout bounds the TLS handshake from the accept.
	HandshakeTimeout time.Duration
	// MaxConns bounds the authenticated connections relayed at once.
	MaxConns int
}

// Relay fronts one of workerd's cross-pod sockets (podcontract.FrontedSockets), which
// workerd keeps open forever without a handshake: it owns the pod IP's port, sheds
// connections that have not authenticated past the pending caps (guardListener),
// terminates mutual TLS within the handshake timeout (a client certificate verified
// against the socket's CA is required), and then copies bytes to workerd's loopback
// socket until either side closes. workerd thus holds only authenticated connections.
// Those are not capped per source: a Worker pod holds one to a shard's gateway per
// WebSocket it relays to a Durable Object; TCP keep-alive ends those of a peer gone.
type Relay struct {
	l       *guardListener
	tls     *tls.Config
	target  string
	o       RelayOptions
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	relayed int
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
	o.MaxPending = cmp.Or(o.MaxPending, DefaultRelayMaxPending)
	o.MaxPendingPerSource = cmp.Or(o.MaxPendingPerSource, DefaultRelayMaxPendingPerSource)
	o.HandshakeTimeout = cmp.Or(o.HandshakeTimeout, DefaultCrossPodHandshakeTimeout)
	o.MaxConns = cmp.Or(o.MaxConns, DefaultRelayMaxConns)
	cfg = cfg.Clone()
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	return &Relay{l: newGuardListener(l, o.MaxPending, o.MaxPendingPerSource), tls: cfg, target: target, o: o,
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

// admit counts an authenticated connection in, within MaxConns.
func (r *Relay) admit() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.relayed >= r.o.MaxConns {
		return false
	}
	r.relayed++
	return true
}

func (r *Relay) done() {
	r.mu.Lock()
	r.relayed--
	r.mu.Unlock()
}

func (r *Relay) handle(raw net.Conn) {
	defer r.handled.Done()
	defer r.untrack(raw)
	c, err := r.open(raw)
	if g, ok := raw.(*guardConn); ok {
		g.settle() // no longer pending, authenticated or about to close
	}
	if err != nil || !r.admit() {
		return
	}
	defer r.done()
	ctx, cancel := context.WithTimeout(context.Background(), r.o.HandshakeTimeout)
	up, err := r.dialer.DialContext(ctx, "tcp", r.target)
	cancel()
	if err != nil {
		return
	}
	defer up.Close()
	pipe(c, up)
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

// pipe copies both ways until one side ends; then both close.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		// A plain reader: the copy uses this buffer, not one the connection types
		// would allocate for it.
		_, _ = io.CopyBuffer(dst, struct{ io.Reader }{src}, make([]byte, relayBufferSize))
		_ = a.Close()
		_ = b.Close()
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}
