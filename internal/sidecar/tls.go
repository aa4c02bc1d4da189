package sidecar

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
)

// Paths of the cross-pod listener (ListenTLS) besides the verified-client ones.
const (
	// runPrefix is the runner-only part of the Workflows API (step results, attempt
	// reports): served on the loopback listener only, never across pods.
	runPrefix = "/workflows/_run/"
	// workflowsPrefix is the engine API other pods of the namespace and the manager call.
	workflowsPrefix = "/workflows/"
)

// ListenTLS binds addr (the pod IP and 9092 in a pod) for the cross-pod listener:
// mutual TLS with cfg (internalca.ServerConfig). Over it, GET /healthz needs no client
// certificate (the kubelet's probes present none); GET /metrics, GET backup.StatusPath (for the manager) and the Workflows engine
// API need one verified against the namespace's or the manager's CA (a scraper presents
// the namespace's, docs/security-internal-plane.md); the runner-only paths and the
// durable channels (pod-internal) are refused. Everything else is served only on the
// loopback listener (Options.Addr). ServeTLS serves it; Shutdown stops it.
func (s *Server) ListenTLS(addr string, cfg *tls.Config) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sidecar: --listen-tls %s: %w", addr, err)
	}
	o := s.opts
	// http.Server bounds the handshake by ReadHeaderTimeout (its tlsHandshakeTimeout),
	// then the headers by it again; bodyDeadline bounds the body.
	srv := &http.Server{
		Handler:           bodyDeadline(crossPod(s.mux), cmp.Or(o.BodyTimeout, DefaultBodyTimeout)),
		TLSConfig:         cfg,
		ReadHeaderTimeout: cmp.Or(o.CrossPodHandshakeTimeout, DefaultCrossPodHandshakeTimeout),
		IdleTimeout:       crossPodIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          quietTLSErrors(),
	}
	g := newGuardListener(l, cmp.Or(o.CrossPodMaxConns, DefaultCrossPodMaxConns),
		cmp.Or(o.CrossPodMaxPerSource, DefaultCrossPodMaxPerSource))
	s.mu.Lock()
	s.tlsListener, s.tlsHTTP = tls.NewListener(g, cfg), srv
	s.mu.Unlock()
	return nil
}

// TLSAddr is the cross-pod listener's bound address ("" before ListenTLS).
func (s *Server) TLSAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tlsListener == nil {
		return ""
	}
	return s.tlsListener.Addr().String()
}

// ServeTLS serves the listener bound by ListenTLS until Shutdown or Close.
func (s *Server) ServeTLS() error {
	s.mu.Lock()
	l, srv := s.tlsListener, s.tlsHTTP
	s.mu.Unlock()
	if l == nil {
		return errors.New("sidecar: ServeTLS before ListenTLS")
	}
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// shutdownTLS stops the cross-pod listener gracefully (nil without ListenTLS).
func (s *Server) shutdownTLS(ctx context.Context) error {
	s.mu.Lock()
	srv := s.tlsHTTP
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Shutdown(ctx)
}

// closeTLS stops the cross-pod listener at once (Close).
func (s *Server) closeTLS() {
	s.mu.Lock()
	srv := s.tlsHTTP
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// crossPod authorizes requests of the cross-pod listener (see ListenTLS).
func crossPod(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case r.Method == http.MethodGet && p == "/healthz":
		case strings.HasPrefix(p, runPrefix):
			http.Error(w, "forbidden: the runner paths are served to the pod itself only", http.StatusForbidden)
			return
		case !strings.HasPrefix(p, workflowsPrefix) && !(r.Method == http.MethodGet && (p == "/metrics" || p == backup.StatusPath)):
			http.Error(w, "forbidden: served to the pod itself only", http.StatusForbidden)
			return
		case !internalca.Verified(r.TLS):
			http.Error(w, "unauthorized: a client certificate of this namespace is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// quietTLSErrors is the server's error log without its per-connection "TLS handshake
// error" lines: under a flood of idle connections each timeout would be a log line;
// the rest (a handler's panic) still reaches stderr.
func quietTLSErrors() *log.Logger { return log.New(handshakeFilter{os.Stderr}, "", log.LstdFlags) }

type handshakeFilter struct{ w io.Writer }

func (f handshakeFilter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("TLS handshake error")) {
		return len(p), nil
	}
	return f.w.Write(p)
}
