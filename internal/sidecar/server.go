package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/telemetry"
)

// Options configure a Server. Other sub-APIs extend the server with Server.Handle (or by
// adding fields here together with their wiring in New).
type Options struct {
	// Addr is the listen address, "host:port" (the pod IP and 9092 in a pod).
	Addr string
	// DataDir is the state directory (podcontract.SidecarDataDir); it is created when missing.
	DataDir string
	// ChannelLimits are the durable-channel limits (channels.DefaultLimits() when zero).
	ChannelLimits channels.Limits
	// ChannelLease is the subscription lease (channels.DefaultLease when 0).
	ChannelLease time.Duration
	// MaxConns bounds the open connections (DefaultMaxConns when 0).
	MaxConns int
	// BodyTimeout is how long a request body may take to arrive (DefaultBodyTimeout when 0).
	BodyTimeout time.Duration
	// CrossPodMaxConns, CrossPodMaxPerSource and CrossPodHandshakeTimeout bound the
	// cross-pod listener (ListenTLS): connections in all, per source address, and the
	// time a connection may take to complete its TLS handshake (the Default* when 0).
	CrossPodMaxConns         int
	CrossPodMaxPerSource     int
	CrossPodHandshakeTimeout time.Duration
	// Registry collects the metrics served on /metrics; a fresh registry with the Go and
	// process collectors when nil.
	Registry *prometheus.Registry
	// Logs receives the Worker's console.* and exception lines from the tail worker
	// (package telemetry); os.Stdout when nil.
	Logs io.Writer
	// TailSinks also receive every tail record (telemetry.Options.Sinks).
	TailSinks []func(*telemetry.Record)
}

// Server is the sidecar: an HTTP server with /healthz, /metrics, /channels/ and the
// prefixes mounted with Handle.
type Server struct {
	opts     Options
	mux      *http.ServeMux
	http     *http.Server
	channels *channels.Manager
	registry *prometheus.Registry

	mu       sync.Mutex
	listener net.Listener
	drainers []func(context.Context) error
	closers  []func(context.Context) error
	// tlsListener and tlsHTTP are the cross-pod listener (ListenTLS, tls.go).
	tlsListener net.Listener
	tlsHTTP     *http.Server
	stopping    atomic.Bool
	// marked are handlers of requests carrying a header, whatever their path
	// (HandleMarked).
	marked []markedHandler
}

type markedHandler struct {
	header string
	h      http.Handler
}

// LameDuck is the least time Shutdown keeps the listeners open after it began, answering
// /healthz with 503 and closing every connection after its response, so that clients
// holding pooled connections learn of the stop from an answer, not from a closed
// connection (APIs check Stopping to refuse new work meanwhile).
const LameDuck = 500 * time.Millisecond

// New makes a Server (not yet listening): it creates DataDir and the channel registry
// (which records its boot id there).
func New(o Options) (*Server, error) {
	if o.DataDir == "" {
		o.DataDir = podcontract.SidecarDataDir
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("sidecar: --data-dir %s: %w", o.DataDir, err)
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	cm, err := channels.NewManager(channels.Options{
		Limits: o.ChannelLimits, Lease: o.ChannelLease, DataDir: o.DataDir, Metrics: channels.NewMetrics(reg),
	})
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, mux: http.NewServeMux(), channels: cm, registry: reg}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if s.Stopping() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("stopping\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	s.Handle(channels.PathPrefix, channels.Handler(cm))
	s.mux.Handle("POST "+podcontract.TailPath, telemetry.Handler(telemetry.Options{
		Metrics: telemetry.NewMetrics(reg, 0), Logs: cmp.Or[io.Writer](o.Logs, os.Stdout), Sinks: o.TailSinks,
	}))
	s.http = newHTTPServer(http.HandlerFunc(s.serve), cmp.Or(o.BodyTimeout, DefaultBodyTimeout))
	return s, nil
}

// serve is the mux; once Shutdown began, every response closes its connection.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.Stopping() {
		w.Header().Set("Connection", "close")
	}
	if n := markers(r.Header); n > 1 {
		http.Error(w, fmt.Sprintf("sidecar: a request may carry one of %s, not %d", strings.Join(podcontract.MarkerHeaders, ", "), n), http.StatusBadRequest)
		return
	}
	for _, m := range s.marked {
		if r.Header.Get(m.header) != "" {
			m.h.ServeHTTP(w, r)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// markers counts the podcontract.MarkerHeaders h carries.
func markers(h http.Header) int {
	n := 0
	for _, m := range podcontract.MarkerHeaders {
		if len(h.Values(m)) > 0 {
			n++
		}
	}
	return n
}

// HandleMarked serves the pod-internal requests that carry header with h, whatever
// their path: the Cache API's requests, whose request targets are the cached URLs.
// The cross-pod listener never routes them. Call it before Serve.
func (s *Server) HandleMarked(header string, h http.Handler) {
	s.marked = append(s.marked, markedHandler{header, h})
}

// Stopping is true once Shutdown began.
func (s *Server) Stopping() bool { return s.stopping.Load() }

// Handle mounts h under prefix (e.g. "/workflows/"; a trailing slash is added when
// missing, and h sees the full path). It must be called before Serve/ListenAndServe.
func (s *Server) Handle(prefix string, h http.Handler) {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	s.mux.Handle(prefix, h)
}

// OnShutdown registers f to run during Shutdown, after the channel registry has answered
// its pending waits and both HTTP servers have finished their in-flight requests (e.g. to
// close a store those requests use).
func (s *Server) OnShutdown(f func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closers = append(s.closers, f)
}

// OnDrain registers f to run during Shutdown after the lame-duck period, while both
// listeners still serve (Stopping is true, so APIs refuse new work) and before they stop
// accepting: for work that needs the pod's own clients to reach the server until it is
// done (the Workflows runner reporting the attempts in flight).
func (s *Server) OnDrain(f func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainers = append(s.drainers, f)
}

// HandleRoot serves requests for "/" itself with h: the path workerd's r2Bucket binding
// sends every call to (the R2 gateway, internal/sidecar/r2). Call it before Serve.
func (s *Server) HandleRoot(h http.Handler) { s.mux.Handle("/{$}", h) }

// Channels is the durable-channel registry.
func (s *Server) Channels() *channels.Manager { return s.channels }

// Registry is the Prometheus registry behind /metrics; sub-APIs register their series here.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// DataDir is the state directory.
func (s *Server) DataDir() string { return s.opts.DataDir }

// Listen binds Options.Addr; Addr() then reports the bound address (useful with port 0).
func (s *Server) Listen() error {
	l, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("sidecar: --listen %s: %w", s.opts.Addr, err)
	}
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
	return nil
}

// Addr is the bound address after Listen, else Options.Addr.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener != nil {
		return s.listener.Addr().String()
	}
	return s.opts.Addr
}

// Serve serves on the listener bound by Listen (binding it first when needed) until
// Shutdown or Close; it returns nil after a Shutdown/Close.
func (s *Server) Serve() error {
	s.mu.Lock()
	l := s.listener
	s.mu.Unlock()
	if l == nil {
		if err := s.Listen(); err != nil {
			return err
		}
		s.mu.Lock()
		l = s.listener
		s.mu.Unlock()
	}
	if err := s.http.Serve(newLimitListener(l, cmp.Or(s.opts.MaxConns, DefaultMaxConns))); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops gracefully: the channel registry answers pending waits with
// REGISTRY_RESTARTED, Stopping turns true for LameDuck (less when ctx ends sooner), the
// OnDrain hooks run, both HTTP servers (pod-internal and cross-pod) stop accepting and
// finish their in-flight requests until ctx ends, then the OnShutdown hooks run.
func (s *Server) Shutdown(ctx context.Context) error {
	s.channels.Close()
	s.stopping.Store(true)
	select {
	case <-time.After(LameDuck):
	case <-ctx.Done():
	}
	s.mu.Lock()
	drainers := append([]func(context.Context) error(nil), s.drainers...)
	closers := append([]func(context.Context) error(nil), s.closers...)
	s.mu.Unlock()
	var errs []error
	for _, f := range drainers {
		errs = append(errs, f(ctx))
	}
	// Both listeners finish their requests in flight before any OnShutdown hook runs:
	// a hook closes what those requests use (the Workflows engine's store).
	tlsErr := make(chan error, 1)
	go func() { tlsErr <- s.shutdownTLS(ctx) }()
	errs = append(errs, s.http.Shutdown(ctx), <-tlsErr)
	for _, f := range closers {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// Close stops at once, dropping open connections (what a crash looks like to clients,
// minus the process exit); pending waits see their connection end.
func (s *Server) Close() error {
	err := s.http.Close()
	s.closeTLS()
	s.channels.Close()
	return err
}
