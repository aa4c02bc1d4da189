package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

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
// certificate (the kubelet's probes present none); GET /metrics and the Workflows engine
// API need one verified against the namespace's or the manager's CA (a scraper presents
// the namespace's, docs/security-internal-plane.md); the runner-only paths and the
// durable channels (pod-internal) are refused. Everything else is served only on the
// loopback listener (Options.Addr). ServeTLS serves it; Shutdown stops it.
func (s *Server) ListenTLS(addr string, cfg *tls.Config) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sidecar: --listen-tls %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           crossPod(s.mux),
		TLSConfig:         cfg,
		ReadHeaderTimeout: s.http.ReadHeaderTimeout,
		ReadTimeout:       s.http.ReadTimeout,
		WriteTimeout:      s.http.WriteTimeout,
		IdleTimeout:       s.http.IdleTimeout,
		MaxHeaderBytes:    s.http.MaxHeaderBytes,
	}
	s.mu.Lock()
	s.tlsListener, s.tlsHTTP = tls.NewListener(l, cfg), srv
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
		case !strings.HasPrefix(p, workflowsPrefix) && !(r.Method == http.MethodGet && p == "/metrics"):
			http.Error(w, "forbidden: served to the pod itself only", http.StatusForbidden)
			return
		case !internalca.Verified(r.TLS):
			http.Error(w, "unauthorized: a client certificate of this namespace is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
