package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Container states, as Docker's State.Status reports them. starting is ours: the
// Backend is still starting it (reported as "created").
const (
	stateCreated  = "created"
	stateStarting = "starting"
	stateRunning  = "running"
	stateExited   = "exited"
	stateRemoving = "removing"
)

// exitStartFailed is the exit code of a container whose start failed (Docker's
// choice for a start error other than a missing or non-executable command).
const exitStartFailed = 128

// container is the record of one Docker container, kept until DELETE.
type container struct {
	id      string
	name    string
	created time.Time
	inst    Instance
	proxy   *proxy // set for a virtual -proxy container

	state      string
	host       string
	exitCode   int
	errMsg     string
	startedAt  time.Time
	finishedAt time.Time

	cancelStart context.CancelFunc // while starting
	startDone   chan struct{}      // closed when Backend.Start returned
	cancelWatch context.CancelFunc // while the exit watcher runs
	exited      chan struct{}      // closed when the run ended
	removed     chan struct{}      // closed when the record is gone
}

var (
	validName = regexp.MustCompile(`^/?[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	// doID is the Durable Object id workerd puts at the end of the name.
	doID = regexp.MustCompile(`-([0-9a-f]{64})$`)
)

const proxySuffix = "-proxy"

// create answers POST /containers/create?name=X: it only records the container.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Query().Get("name"), "/")
	if name == "" || !validName.MatchString(name) {
		writeError(w, http.StatusBadRequest, "a container name is required (name=%q)", name)
		return
	}
	var req createRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "decoding the create body: %v", err)
		return
	}
	c := &container{id: newID(), name: name, created: time.Now(), state: stateCreated,
		exited: make(chan struct{}), removed: make(chan struct{})}
	if strings.HasSuffix(name, proxySuffix) {
		p, err := s.newProxy(strings.TrimSuffix(name, proxySuffix))
		if err != nil {
			writeError(w, http.StatusInternalServerError, "opening the ingress listener of %s: %v", name, err)
			return
		}
		c.proxy = p
		c.inst = Instance{Name: name, Image: req.Image, Args: req.Cmd, Env: req.Env}
	} else {
		if status, msg := s.refuse(&req); status != 0 {
			writeError(w, status, "%s", msg)
			return
		}
		c.inst = Instance{Name: name, Image: req.Image, Args: req.Cmd, Env: withDurableObjectID(req.Env, name)}
	}
	s.mu.Lock()
	if _, ok := s.containers[name]; ok {
		s.mu.Unlock()
		if c.proxy != nil {
			c.proxy.close()
		}
		writeError(w, http.StatusConflict, "Conflict. The container name %q is already in use", "/"+name)
		return
	}
	s.containers[name] = c
	s.mu.Unlock()
	s.log.V(1).Info("container created", "name", name, "image", req.Image)
	writeJSON(w, http.StatusCreated, createResponse{Id: c.id, Warnings: []string{}})
}

// refuse checks an app's create body: what would need privileges on the node is
// refused rather than silently dropped, so the user learns it does not apply.
func (s *Server) refuse(req *createRequest) (int, string) {
	hc := req.HostConfig
	var asked []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Mounts", len(hc.Mounts) > 0}, {"Binds", len(hc.Binds) > 0}, {"CapAdd", len(hc.CapAdd) > 0},
		{"Devices", len(hc.Devices) > 0}, {"SecurityOpt", len(hc.SecurityOpt) > 0},
		{"Privileged", hc.Privileged}, {"Entrypoint", len(req.Entrypoint) > 0},
	} {
		if f.set {
			asked = append(asked, f.name)
		}
	}
	switch {
	case req.Image == "":
		return http.StatusBadRequest, "the container has no Image"
	case len(asked) > 0:
		return http.StatusBadRequest, "HostConfig " + strings.Join(asked, ", ") +
			" is not supported by workerd-operator (docs/containers.md): containers run without privileges, mounts or devices"
	case s.opts.Image != "" && req.Image != s.opts.Image:
		return http.StatusNotFound, "No such image: " + req.Image
	}
	return 0, ""
}

// withDurableObjectID replaces workerd's placeholder CLOUDFLARE_DURABLE_OBJECT_ID with
// the real id from the name, as Cloudflare does.
func withDurableObjectID(env []string, name string) []string {
	m := doID.FindStringSubmatch(name)
	if m == nil {
		return env
	}
	out := make([]string, len(env))
	for i, kv := range env {
		if strings.HasPrefix(kv, "CLOUDFLARE_DURABLE_OBJECT_ID=") {
			kv = "CLOUDFLARE_DURABLE_OBJECT_ID=" + m[1]
		}
		out[i] = kv
	}
	return out
}

func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lookup returns the record of name, or answers 404.
func (s *Server) lookup(w http.ResponseWriter, name string) *container {
	s.mu.Lock()
	c := s.containers[name]
	s.mu.Unlock()
	if c == nil {
		writeError(w, http.StatusNotFound, "No such container: %s", name)
	}
	return c
}

// inspect answers GET /containers/X/json.
func (s *Server) inspect(w http.ResponseWriter, name string) {
	c := s.lookup(w, name)
	if c == nil {
		return
	}
	s.mu.Lock()
	resp := inspectResponse{
		Id: c.id, Name: "/" + c.name, Created: c.created.UTC().Format(time.RFC3339Nano),
		State: containerState{Status: c.state, Running: c.state == stateRunning, ExitCode: c.exitCode,
			Error: c.errMsg, StartedAt: dockerTime(c.startedAt), FinishedAt: dockerTime(c.finishedAt)},
		Config:          containerConfig{Image: c.inst.Image, Cmd: c.inst.Args, Env: c.inst.Env},
		NetworkSettings: networkSettings{Ports: map[string][]portBinding{}},
	}
	if c.state == stateStarting {
		resp.State.Status = stateCreated
	}
	if c.proxy != nil && c.state == stateRunning {
		resp.NetworkSettings.Ports["39001/tcp"] = []portBinding{{HostIp: "127.0.0.1", HostPort: c.proxy.port()}}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

// dockerTime formats t as Docker does, with its zero time for "never".
func dockerTime(t time.Time) string {
	if t.IsZero() {
		return "0001-01-01T00:00:00Z"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// finish ends c's run once: later calls (a watcher after DELETE) change nothing.
// Called with s.mu held.
func (c *container) finish(code int, errMsg string) {
	select {
	case <-c.exited:
		return
	default:
	}
	if c.state != stateRemoving {
		c.state = stateExited
	}
	c.exitCode, c.errMsg, c.finishedAt = code, errMsg, time.Now()
	close(c.exited)
}

var errRemoved = errors.New("the container was removed while it was starting")
