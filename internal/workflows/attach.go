package workflows

import (
	"net/http"
	"strings"

	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Attach makes an Engine (DataDir defaults to the server's) and mounts its API at
// PathPrefix on s; when s shuts down the engine waits for its attempts in flight while
// the listeners still serve the runner (s.OnDrain, until the shutdown's context ends),
// then closes once they have finished their requests (s.OnShutdown). While s is stopping, requests that would
// change state are refused with 503 "engine.stopping" and api.NotProcessedHeader (the
// runner protocol under /workflows/_run/ and reads are still served). Call it before
// s.Serve.
func Attach(s *sidecar.Server, o Options) (*Engine, error) {
	if o.DataDir == "" {
		o.DataDir = s.DataDir()
	}
	e, err := New(o)
	if err != nil {
		return nil, err
	}
	for _, c := range e.Collectors() {
		s.Registry().MustRegister(c)
	}
	h := e.Handler()
	s.Handle(api.PathPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Stopping() && r.Method != http.MethodGet && !strings.HasPrefix(r.URL.Path, api.PathPrefix+"_run/") {
			w.Header().Set(api.NotProcessedHeader, "1")
			replyErr(w, api.Errorf(503, "engine.stopping", "workflows: the engine is stopping (its pod is being replaced); the request was not processed, send it again"))
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.OnDrain(e.Quiesce)
	s.OnShutdown(e.Shutdown)
	return e, nil
}
