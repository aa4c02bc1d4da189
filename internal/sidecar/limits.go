package sidecar

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Connection and timeout defaults of the sidecar's HTTP server (project decisions
// bounding its memory and what a slow or idle client can hold; docs/security.md).
const (
	// DefaultMaxConns is Options.MaxConns: open connections at once; past it the next
	// connection waits in the listen backlog until one closes. A connection costs about
	// 20 KiB (buffers and its goroutine), so 1024 cost about 20 MiB of the sidecar's
	// 256 MiB. Each pending channel wait holds one.
	DefaultMaxConns = 1024
	// DefaultBodyTimeout is Options.BodyTimeout: how long a request body may take to
	// arrive (bodies are at most about 1 MiB).
	DefaultBodyTimeout = 30 * time.Second
	// DefaultCrossPodMaxConns is Options.CrossPodMaxConns: the cross-pod listener's
	// connections at once (pods of the namespace, the manager, scrapers, the kubelet's
	// probes); about 20 KiB each, so 512 cost about 10 MiB.
	DefaultCrossPodMaxConns = 512
	// DefaultCrossPodMaxPerSource is Options.CrossPodMaxPerSource: connections of one
	// source address; a client pools a few, so one pod cannot take the listener.
	DefaultCrossPodMaxPerSource = 32
	// DefaultCrossPodHandshakeTimeout is Options.CrossPodHandshakeTimeout: the TLS
	// handshake, then the request headers, each get this long.
	DefaultCrossPodHandshakeTimeout = 5 * time.Second
	// DefaultRelayMaxPending and DefaultRelayMaxPendingPerSource are RelayOptions'
	// MaxPending and MaxPendingPerSource: connections of a relay (relay.go) still in
	// their TLS handshake, in all and per source address. Larger than :9092's because a
	// Worker pod opens one gateway connection per Durable Object WebSocket, so a
	// reconnecting crowd is a burst of handshakes from one source; each costs a few KiB
	// and holds its place 5 s at most.
	DefaultRelayMaxPending          = 1024
	DefaultRelayMaxPendingPerSource = 256
	// DefaultRelayMaxConns is RelayOptions.MaxConns: authenticated connections a
	// relay (relay.go) carries to workerd at once. Each costs about 40 KiB (two
	// goroutines, two 8 KiB buffers, its TLS state), so 2048 cost about 80 MiB of the
	// sidecar's 256 MiB. Every WebSocket a Worker pod holds to a Durable Object is one
	// connection to its shard's gateway, so this is also the cross-pod WebSockets a
	// shard pod holds.
	DefaultRelayMaxConns = 2048
	// relayBufferSize is each direction's copy buffer of a relayed connection.
	relayBufferSize = 8 << 10
	// crossPodIdleTimeout closes a cross-pod keep-alive connection nobody uses.
	crossPodIdleTimeout = 30 * time.Second
	// readHeaderTimeout bounds the request line and headers; idleTimeout closes a
	// keep-alive connection nobody uses; maxHeaderBytes bounds the headers.
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// newHTTPServer is the sidecar's http.Server around h. There is no ReadTimeout or
// WriteTimeout: a channel wait is answered after up to 15 minutes; bodies are bounded
// by bodyDeadline instead.
func newHTTPServer(h http.Handler, bodyTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           bodyDeadline(h, bodyTimeout),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// bodyDeadline gives a request's body d to arrive: the connection's read deadline is set
// when the handler starts and cleared once the body has been read to its end (so a long
// wait after it is not cut, and a client that goes away is still seen).
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, d: d}
			}
		}
		h.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	d    time.Duration
	done bool
}

// RenewDeadline gives the body another d from now: a body that streams many requests (the
// channels pipeline) has d per line rather than for all of it.
func (b *deadlineBody) RenewDeadline() {
	if !b.done {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	}
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done { // after a timeout the deadline stays: the server drops the rest
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// limitListener accepts at most n connections at once: Accept waits for one to close.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func newLimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
