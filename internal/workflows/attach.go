package workflows

import (
	"context"

	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Attach makes an Engine (DataDir defaults to the server's) and mounts its API at
// PathPrefix on s; the engine closes when s shuts down. Call it before s.Serve.
func Attach(s *sidecar.Server, o Options) (*Engine, error) {
	if o.DataDir == "" {
		o.DataDir = s.DataDir()
	}
	e, err := New(o)
	if err != nil {
		return nil, err
	}
	s.Handle(api.PathPrefix, e.Handler())
	s.OnShutdown(func(context.Context) error { return e.Close() })
	return e, nil
}
