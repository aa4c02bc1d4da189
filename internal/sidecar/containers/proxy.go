package containers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"
)

// dialTimeout bounds a CONNECT's dial to the app; workerd retries on 400.
const dialTimeout = 5 * time.Second

// proxy is a virtual "<app>-proxy" container: the loopback listener workerd finds as
// its published port 39001. It answers the egress interceptor's control endpoints and
// turns workerd's `CONNECT 127.0.0.1:P` into a TCP connection to the app's host:P.
type proxy struct {
	s        *Server
	app      string
	l        net.Listener
	hs       *http.Server
	internet bool // guarded by s.mu

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closed  bool
}

func (s *Server) newProxy(app string) (*proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{s: s, app: app, l: l, tunnels: map[net.Conn]struct{}{}}
	p.hs = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.hs.Serve(l) }()
	return p, nil
}

func (p *proxy) port() string {
	_, port, _ := net.SplitHostPort(p.l.Addr().String())
	return port
}

// close stops the listener and cuts open tunnels, as removing the proxy container
// would.
func (p *proxy) close() {
	_ = p.hs.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.tunnels {
		_ = c.Close()
	}
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r)
	case r.Method == http.MethodPut && r.URL.Path == "/egress":
		p.egress(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/ca":
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(p.s.ca())
	default:
		http.NotFound(w, r)
	}
}

// egress stores internet.enabled: workerd sends it before every app start, and it is
// the only place enableInternet reaches the container engine.
func (p *proxy) egress(w http.ResponseWriter, r *http.Request) {
	var cfg egressConfig
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&cfg); err != nil {
		http.Error(w, "decoding the egress configuration: "+err.Error(), http.StatusBadRequest)
		return
	}
	p.s.mu.Lock()
	p.internet = cfg.Internet.Enabled
	p.s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// connect answers CONNECT: 400 (workerd: "Container is not listening to port P") when
// the app is not running or nothing accepts on the port, else 200 and a relay.
func (p *proxy) connect(w http.ResponseWriter, r *http.Request) {
	dst := r.Header.Get("X-Dst-Addr")
	if dst == "" {
		dst = r.Host
	}
	host, port, err := net.SplitHostPort(dst)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		http.Error(w, "only 127.0.0.1:<port> of the container can be reached, not "+dst, http.StatusBadRequest)
		return
	}
	p.s.mu.Lock()
	var target string
	if c := p.s.containers[p.app]; c != nil && c.state == stateRunning && c.host != "" {
		target = net.JoinHostPort(c.host, port)
	}
	p.s.mu.Unlock()
	if target == "" {
		http.Error(w, "container "+p.app+" is not running", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dialTimeout)
	defer cancel()
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	if err != nil {
		http.Error(w, "container is not listening: "+err.Error(), http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "tunnel: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if !p.track(conn, up) {
		return
	}
	defer p.untrack(conn, up)
	_, _ = brw.WriteString("HTTP/1.1 200 Connection Established\r\n\r\n")
	if brw.Flush() == nil {
		relay(conn, brw.Reader, up)
	}
}

func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.tunnels, c)
		_ = c.Close()
	}
}

// relay copies both ways, passing each side's end of stream on as a half-close so
// that a request/response over the tunnel completes like it would over TCP.
func relay(client net.Conn, clientR io.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, clientR); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, up); closeWrite(client); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// ca is the PEM workerd fetches from GET /ca. Nothing intercepts TLS here, so it only
// has to be a well-formed certificate; one is made per Server.
func (s *Server) ca() []byte {
	s.caOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "workerd-operator containers (no TLS interception)"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err == nil {
			s.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		}
	})
	return s.caPEM
}
