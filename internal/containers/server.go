package containers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// The manager creates and deletes instance pods and their NetworkPolicies, and reads the
// namespaces' CAs (Secrets, already granted to the manager) and DurableObjectNamespaces.
// The markers that generate these rules live in controllers/containers.go, where
// controller-gen reads them.

// Defaults of Server's bounds.
const (
	DefaultStartTimeout = 2 * time.Minute
	DefaultWaitPoll     = 5 * time.Minute
	DefaultCATTL        = 30 * time.Second
	// DefaultRemoveTimeout bounds how long Remove waits for a pod to be gone.
	DefaultRemoveTimeout = time.Minute
)

// Caps on a request.
const (
	// MaxArgsEnvBytes caps the bytes of a start's args and env together.
	MaxArgsEnvBytes = 64 << 10
	// maxBodyBytes caps a request body (the JSON around args and env).
	maxBodyBytes = 256 << 10
	// maxNameBytes caps the Docker name workerd chose.
	maxNameBytes = 1024
	// maxGraceSeconds caps Stop's grace period (a longer one is shortened to it): a
	// stopping instance still runs and counts toward maxInstances, so its stop must end
	// soon. workerd's own stop waits as long (Docker's StopTimeout).
	maxGraceSeconds = specs.ContainerStopSeconds
	// maxWaitsPerNamespace caps a namespace's concurrent Wait long-polls, each an API
	// watch held open for up to WaitPoll; beyond it Wait answers 429.
	maxWaitsPerNamespace = 256
)

// NamespacedHandler serves a request whose caller's certificate names namespace ns.
type NamespacedHandler interface {
	ServeNamespace(w http.ResponseWriter, r *http.Request, ns string)
}

// Server is the containers API's http.Handler. Every request must come over TLS with
// a client certificate of a namespace (ServerTLSConfig); the namespace it names is the
// only namespace the request reaches.
type Server struct {
	// Client reads and writes directly (no cache): pods, DurableObjectNamespaces,
	// NetworkPolicies and the namespaces' internal TLS Secrets.
	Client client.WithWatch
	// Log gets a line for every decision; Events, when set, gets an Event too.
	Log    logr.Logger
	Events events.EventRecorder
	// Options are the manager's isolation settings, which instance pods honour.
	Options specs.Options
	// NetworkPolicies: give each DurableObjectNamespace's instances their
	// NetworkPolicies (specs.BuildContainerNetworkPolicies) on their first start.
	NetworkPolicies bool
	// StartTimeout bounds how long Start waits for a pod to run (DefaultStartTimeout);
	// WaitPoll how long one Wait call holds before answering 204 (DefaultWaitPoll);
	// CATTL how long a namespace's CA is cached (DefaultCATTL).
	StartTimeout, WaitPoll, CATTL time.Duration
	// Namespaced serves paths under a prefix to callers authenticated the same way
	// (the manager's other internal APIs, e.g. Shared user Workers' code).
	Namespaced map[string]NamespacedHandler

	init     sync.Once
	auth     *authenticator
	locksMu  sync.Mutex
	locks    map[string]*sync.Mutex // per namespace/DurableObjectNamespace: count, then create
	policies sync.Map               // DurableObjectNamespace UID → its NetworkPolicies were applied
	exits    exitLog                // exits Wait read, whose pods it deleted
	waits    waitSlots              // Wait calls in flight per namespace
}

func (s *Server) setup() {
	s.init.Do(func() {
		if s.StartTimeout <= 0 {
			s.StartTimeout = DefaultStartTimeout
		}
		if s.WaitPoll <= 0 {
			s.WaitPoll = DefaultWaitPoll
		}
		if s.CATTL <= 0 {
			s.CATTL = DefaultCATTL
		}
		s.auth = &authenticator{reader: s.Client, ttl: s.CATTL, now: time.Now}
		s.locks = map[string]*sync.Mutex{}
	})
}

// ServeHTTP authenticates the caller, decodes its request and runs it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.setup()
	log := s.Log.WithValues("path", r.URL.Path, "remote", r.RemoteAddr)
	ns, err := s.auth.namespace(r.Context(), r.TLS)
	if err != nil {
		log.Info("refused: not authenticated", "reason", err.Error())
		status := StatusCode(err)
		if status == 0 {
			status = http.StatusUnauthorized
		}
		writeError(w, &Error{StatusCode: status, Message: err.Error()})
		return
	}
	log = log.WithValues("namespace", ns)
	ctx := logr.NewContext(r.Context(), log)
	for prefix, h := range s.Namespaced {
		if strings.HasPrefix(r.URL.Path, prefix) {
			h.ServeNamespace(w, r.WithContext(ctx), ns)
			return
		}
	}
	if r.Method != http.MethodPost {
		writeError(w, &Error{StatusCode: http.StatusMethodNotAllowed, Message: r.Method + " " + r.URL.Path + ": only POST"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	switch r.URL.Path {
	case StartPath:
		var req StartRequest
		if decode(w, r, &req) {
			out, err := s.start(ctx, ns, req)
			reply(w, out, err)
		}
	case WaitPath, StopPath, RemovePath:
		var req InstanceRequest
		if decode(w, r, &req) {
			s.instance(ctx, w, ns, r.URL.Path, req)
		}
	default:
		writeError(w, &Error{StatusCode: http.StatusNotFound, Message: "no such path: " + r.URL.Path})
	}
}

// instance runs Wait, Stop or Remove.
func (s *Server) instance(ctx context.Context, w http.ResponseWriter, ns, path string, req InstanceRequest) {
	if err := validInstance(req.ShardPod, req.Name); err != nil {
		writeError(w, err)
		return
	}
	switch path {
	case WaitPath:
		if !s.waits.acquire(ns, maxWaitsPerNamespace) {
			writeError(w, errorf(http.StatusTooManyRequests, "namespace %s has %d Wait calls in flight, the most the manager holds: try again", ns, maxWaitsPerNamespace))
			return
		}
		defer s.waits.release(ns)
		code, done, err := s.wait(ctx, ns, req)
		switch {
		case err != nil:
			writeError(w, err)
		case !done:
			w.WriteHeader(http.StatusNoContent)
		default:
			reply(w, WaitResponse{ExitCode: code}, nil)
		}
	case StopPath:
		replyEmpty(w, s.stop(ctx, ns, req))
	case RemovePath:
		replyEmpty(w, s.remove(ctx, ns, req))
	}
}

// lock is the lock of DurableObjectNamespace dons of namespace ns: one replica counts
// its instances and creates one at a time.
func (s *Server) lock(ns, dons string) *sync.Mutex {
	s.locksMu.Lock()
	defer s.locksMu.Unlock()
	key := ns + "/" + dons
	if s.locks[key] == nil {
		s.locks[key] = &sync.Mutex{}
	}
	return s.locks[key]
}

// event records a decision as a log line and, with a recorder, an Event about regarding.
func (s *Server) event(ctx context.Context, regarding, related runtime.Object, eventType, reason, action, msg string) {
	logr.FromContextOrDiscard(ctx).Info(msg, "event", reason, "action", action, "type", eventType)
	if s.Events != nil && regarding != nil {
		s.Events.Eventf(regarding, related, eventType, reason, action, "%s", msg)
	}
}

func decode(w http.ResponseWriter, r *http.Request, into any) bool {
	// Unknown fields are ignored: a sidecar may be newer than the manager mid-rollout.
	if err := json.NewDecoder(r.Body).Decode(into); err != nil {
		writeError(w, &Error{StatusCode: http.StatusBadRequest, Message: "request body: " + err.Error()})
		return false
	}
	return true
}

func reply(w http.ResponseWriter, out any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func replyEmpty(w http.ResponseWriter, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeError answers err's status (an *Error's, else that of an API error, else 500)
// with its message.
func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var e *Error
	var api apierrors.APIStatus
	switch {
	case errors.As(err, &e):
		status = e.StatusCode
	case errors.As(err, &api) && api.Status().Code >= 400:
		status = int(api.Status().Code)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Message: err.Error()})
}

// errorf is an *Error of status.
func errorf(status int, format string, args ...any) *Error {
	return &Error{StatusCode: status, Message: fmt.Sprintf(format, args...)}
}

// podExited reports whether p's instance container has terminated, with its exit
// code; a pod that ended without a terminated container (evicted, ...) counts as killed
// unless it succeeded.
func podExited(p *corev1.Pod, container string) (int, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			return int(cs.State.Terminated.ExitCode), true
		}
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return 0, true
	case corev1.PodFailed:
		return ExitCodeGone, true
	}
	return 0, false
}
