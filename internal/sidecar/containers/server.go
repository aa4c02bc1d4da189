package containers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Options configure a Server.
type Options struct {
	// Image, when set, is the only image an app container may use; creating one with
	// another image answers 404 "No such image", as Docker does for a missing image.
	Image string
	Log   logr.Logger
}

// Server is the Docker Engine API subset workerd uses. It is an http.Handler; Serve
// runs it on a listener (ListenUnix makes the socket workerd's socketPath names).
type Server struct {
	b    Backend
	opts Options
	log  logr.Logger

	// ctx lives as long as the Server; exit watchers run under it.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	containers map[string]*container
	servers    []*http.Server
	closed     bool

	caOnce sync.Once
	caPEM  []byte
}

// New returns a Server running app containers with b.
func New(b Backend, opts Options) *Server {
	log := opts.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{b: b, opts: opts, log: log, ctx: ctx, cancel: cancel, containers: map[string]*container{}}
}

// ListenUnix listens on the unix socket path, replacing a stale socket left there by
// an earlier process. A path longer than a socket address holds (108 bytes) is bound
// through its directory's /proc/self/fd link.
func ListenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	if len(path) < maxSocketPath {
		return net.Listen("unix", path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	l, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false) // the name is the long path's; it goes with the volume
	return l, nil
}

// maxSocketPath is the size of sockaddr_un's sun_path on Linux, with its final NUL.
const maxSocketPath = 108

// Serve answers Docker API requests on l until Close. There is no write timeout:
// POST /containers/X/wait is answered only when the container exits, hours later.
func (s *Server) Serve(l net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return http.ErrServerClosed
	}
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	return hs.Serve(l)
}

// Close stops serving and closes every proxy listener. It leaves the Backend's
// instances alone: whoever owns the Backend decides what outlives the Server.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	var proxies []*proxy
	for _, c := range s.containers {
		if c.proxy != nil {
			proxies = append(proxies, c.proxy)
		}
	}
	s.mu.Unlock()
	s.cancel()
	var errs []error
	for _, hs := range servers {
		errs = append(errs, hs.Close())
	}
	for _, p := range proxies {
		p.close()
	}
	return errors.Join(errs...)
}

// versionPrefix is the optional API version of Docker clients (/v1.43/containers/...);
// workerd sends none.
var versionPrefix = regexp.MustCompile(`^/v[0-9]+(\.[0-9]+)?/`)

// ServeHTTP routes the endpoints workerd calls; everything else is 501.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if loc := versionPrefix.FindStringIndex(path); loc != nil {
		path = path[loc[1]-1:]
	}
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	route := r.Method + " " + parts[0]
	switch {
	case route == "GET volumes" && len(parts) == 1:
		writeJSON(w, http.StatusOK, volumeList{Volumes: []struct{}{}, Warnings: []string{}})
	case route == "GET networks" && len(parts) == 2 && parts[1] == "bridge":
		s.bridge(w)
	case route == "POST containers" && len(parts) == 2 && parts[1] == "create":
		s.create(w, r)
	case parts[0] == "containers" && len(parts) == 2 && r.Method == http.MethodDelete:
		s.remove(w, r, parts[1])
	case parts[0] == "containers" && len(parts) == 3:
		s.containerAction(w, r, parts[1], r.Method+" "+parts[2])
	default:
		notSupported(w, r)
	}
}

func (s *Server) containerAction(w http.ResponseWriter, r *http.Request, name, action string) {
	switch action {
	case "GET json":
		s.inspect(w, name)
	case "POST start":
		s.start(w, r, name)
	case "POST wait":
		s.wait(w, r, name)
	case "POST kill":
		s.kill(w, r, name)
	default:
		notSupported(w, r)
	}
}

// bridge answers GET /networks/bridge. workerd binds its egress listener on the
// Gateway, so 127.0.0.1 keeps that listener on the pod's loopback.
func (s *Server) bridge(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, network{
		Name: "bridge", Id: "bridge", Driver: "bridge",
		IPAM: ipam{Driver: "default", Config: []ipamConfig{{Subnet: "127.0.0.0/8", Gateway: "127.0.0.1"}}},
	})
}

func notSupported(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotImplemented, "%s %s is not supported by workerd-operator (docs/containers.md)", r.Method, r.URL.Path)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"message":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, errorResponse{Message: fmt.Sprintf(format, args...)})
}
