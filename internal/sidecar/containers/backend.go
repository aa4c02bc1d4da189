package containers

import (
	"context"
	"time"
)

// Instance is one app container workerd asked for.
type Instance struct {
	Name     string // the Docker name workerd chose (workerd-<session>-<uniqueKey>-<64 hex DO id>)
	Image    string
	Args     []string // Docker Cmd (workerd sends the user's entrypoint option here)
	Env      []string // K=V, as workerd sent them
	Internet bool     // the last PUT /egress of its -proxy said internet.enabled
}

// Backend runs app containers.
type Backend interface {
	// Start runs inst and returns the host (IP or name, no port) its ports are reached at, once it is running.
	Start(ctx context.Context, inst Instance) (host string, err error)
	// Wait blocks until the named instance has exited and returns its exit code.
	Wait(ctx context.Context, name string) (exitCode int, err error)
	// Stop stops it: grace 0 kills it now, otherwise SIGTERM then SIGKILL after grace.
	Stop(ctx context.Context, name string, grace time.Duration) error
	// Remove deletes it and returns once it is gone; unknown names are not an error.
	Remove(ctx context.Context, name string) error
}
