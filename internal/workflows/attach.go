package workflows

import (
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Attach makes an Engine (DataDir defaults to the server's) and mounts its API at
// PathPrefix on s; when s shuts down the engine waits for its attempts in flight (until
// the shutdown's context ends) and closes. Call it before s.Serve.
func Attach(s *sidecar.Server, o Options) (*Engine, error) {
	if o.DataDir == "" {
		o.DataDir = s.DataDir()
	}
	e, err := New(o)
	if err != nil {
		return nil, err
	}
	s.Handle(api.PathPrefix, e.Handler())
	s.OnShutdown(e.Shutdown)
	return e, nil
}
