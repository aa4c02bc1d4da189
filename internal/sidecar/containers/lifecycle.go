package containers

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stopGrace is how long SIGTERM/SIGINT waits before SIGKILL: workerd's StopTimeout.
const stopGrace = 10 * time.Second

// start answers POST /containers/X/start. For an app it blocks until Backend.Start
// has it running, so that workerd's first getTcpPort(...).fetch finds it up.
func (s *Server) start(w http.ResponseWriter, r *http.Request, name string) {
	c := s.lookup(w, name)
	if c == nil {
		return
	}
	s.mu.Lock()
	switch c.state {
	case stateRunning, stateStarting:
		s.mu.Unlock()
		w.WriteHeader(http.StatusNotModified)
		return
	case stateExited, stateRemoving:
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "container %s is %s; restarting one is not supported by workerd-operator "+
			"(docs/containers.md): remove it and create it again", name, c.state)
		return
	}
	if c.proxy != nil {
		c.state, c.startedAt = stateRunning, time.Now()
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	inst := c.inst
	inst.Internet = s.internetFor(name)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	c.state, c.cancelStart, c.startDone = stateStarting, cancel, make(chan struct{})
	s.mu.Unlock()

	host, err := s.b.Start(ctx, inst)
	if err := s.started(c, host, err); err != nil {
		s.log.Error(err, "container start failed", "name", name)
		writeError(w, http.StatusInternalServerError, "starting container %s: %v", name, err)
		return
	}
	s.log.V(1).Info("container running", "name", name, "host", host)
	w.WriteHeader(http.StatusNoContent)
}

// started records the result of Backend.Start and, on success, watches for the exit.
func (s *Server) started(c *container, host string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.cancelStart = nil
	close(c.startDone)
	if err == nil && c.state == stateRemoving {
		err = errRemoved
	}
	if err != nil {
		c.finish(exitStartFailed, err.Error())
		return err
	}
	c.state, c.host, c.startedAt = stateRunning, host, time.Now()
	ctx, cancel := context.WithCancel(s.ctx)
	c.cancelWatch = cancel
	go s.watch(ctx, c)
	return nil
}

// watch records the exit code of c's run. One watcher per run serves every /wait.
func (s *Server) watch(ctx context.Context, c *container) {
	code, err := s.b.Wait(ctx, c.name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return // DELETE or Close ended the run
	}
	if err != nil {
		s.log.Error(err, "waiting for the container failed", "name", c.name)
		c.finish(exitStartFailed, "waiting for the container: "+err.Error())
		return
	}
	s.log.V(1).Info("container exited", "name", c.name, "exitCode", code)
	c.finish(code, "")
}

// internetFor is the internet.enabled the app's -proxy was last given. Called with
// s.mu held.
func (s *Server) internetFor(app string) bool {
	if p := s.containers[app+proxySuffix]; p != nil && p.proxy != nil {
		return p.proxy.internet
	}
	return false
}

// wait answers POST /containers/X/wait. condition not-running (the default) long-polls
// for the exit code; removed waits until DELETE has removed it.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, name string) {
	cond := r.URL.Query().Get("condition")
	if cond != "" && cond != "not-running" && cond != "removed" {
		writeError(w, http.StatusBadRequest, "wait condition %q is not supported by workerd-operator (docs/containers.md)", cond)
		return
	}
	c := s.lookup(w, name)
	if c == nil {
		return
	}
	done := c.exited
	s.mu.Lock()
	if cond == "removed" {
		done = c.removed
	} else if c.state == stateCreated {
		done = nil // never started: not running already
	}
	s.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	resp := waitResponse{StatusCode: c.exitCode}
	if c.errMsg != "" {
		resp.Error = &waitError{Message: c.errMsg}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

// kill answers POST /containers/X/kill. Kubernetes cannot deliver arbitrary signals,
// so SIGTERM/SIGINT become a graceful stop (SIGKILL after stopGrace) and SIGKILL an
// immediate one.
func (s *Server) kill(w http.ResponseWriter, r *http.Request, name string) {
	sig := r.URL.Query().Get("signal")
	grace, ok := parseSignal(sig)
	if !ok {
		writeError(w, http.StatusBadRequest, "signal %q is not supported by workerd-operator (docs/containers.md): "+
			"only SIGTERM and SIGINT (stop, SIGKILL after %v) and SIGKILL", sig, stopGrace)
		return
	}
	c := s.lookup(w, name)
	if c == nil {
		return
	}
	s.mu.Lock()
	running := c.state == stateRunning
	if running && c.proxy != nil {
		c.finish(128+signalNumber(grace), "")
	}
	s.mu.Unlock()
	if !running {
		writeError(w, http.StatusConflict, "Container %s is not running", name)
		return
	}
	if c.proxy == nil {
		if err := s.b.Stop(r.Context(), name, grace); err != nil {
			writeError(w, http.StatusInternalServerError, "stopping container %s: %v", name, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// parseSignal maps a Docker signal (name, with or without SIG, or number) to a stop
// grace period. Docker's default is SIGKILL.
func parseSignal(sig string) (time.Duration, bool) {
	switch strings.TrimPrefix(strings.ToUpper(sig), "SIG") {
	case "TERM", "15", "INT", "2":
		return stopGrace, true
	case "KILL", "9", "":
		return 0, true
	}
	return 0, false
}

// signalNumber is the signal a grace period stands for, for a virtual proxy's exit code.
func signalNumber(grace time.Duration) int {
	if grace == 0 {
		return 9
	}
	return 15
}

// remove answers DELETE /containers/X: it returns once the Backend has removed the
// instance, so workerd's following wait?condition=removed finds nothing.
func (s *Server) remove(w http.ResponseWriter, r *http.Request, name string) {
	force, _ := strconv.ParseBool(r.URL.Query().Get("force"))
	c := s.lookup(w, name)
	if c == nil {
		return
	}
	s.mu.Lock()
	switch {
	case c.state == stateRemoving:
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "removal of container %s is already in progress", name)
		return
	case (c.state == stateRunning || c.state == stateStarting) && !force:
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "You cannot remove a running container %s. Stop the container before attempting removal or force remove", name)
		return
	}
	prev := c.state
	c.state = stateRemoving
	if c.cancelStart != nil {
		c.cancelStart()
	}
	startDone := c.startDone
	s.mu.Unlock()

	if err := s.removeInstance(r.Context(), c, prev, startDone); err != nil {
		s.log.Error(err, "removing the container failed", "name", name)
		writeError(w, http.StatusInternalServerError, "removing container %s: %v", name, err)
		return
	}
	s.log.V(1).Info("container removed", "name", name)
	w.WriteHeader(http.StatusNoContent)
}

// removeInstance removes c's instance (after a Start in flight has returned, so the
// Backend never starts something already removed) and then its record.
func (s *Server) removeInstance(ctx context.Context, c *container, prev string, startDone chan struct{}) error {
	if c.proxy != nil {
		c.proxy.close()
	} else {
		if startDone != nil {
			<-startDone
		}
		if err := s.b.Remove(ctx, c.name); err != nil {
			s.mu.Lock()
			c.state = prev // removable again
			select {
			case <-c.exited:
				c.state = stateExited
			default:
			}
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.cancelWatch != nil {
		c.cancelWatch()
	}
	c.finish(128+9, "") // killed by the forced removal, if it was still running
	delete(s.containers, c.name)
	close(c.removed)
	return nil
}
