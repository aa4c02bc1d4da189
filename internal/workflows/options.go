package workflows

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Options configure an Engine.
type Options struct {
	// DataDir holds workflows.db (the shard's PVC in a pod).
	DataDir string
	// RunnerURL is the base URL of workerd's `workflows` socket serving
	// internal/shim/workflows-runner.js: http://<pod IP>:<podcontract.RunnerPort>.
	RunnerURL string
	// Workflows served by this engine; create() on another name fails.
	Workflows []api.WorkflowConfig
	// Profile and Table give the limits (limits.DefaultProfile and limits.Default() when zero).
	Profile limits.Profile
	Table   *limits.Table
	// TimeScale multiplies every engine-side duration (sleeps, retry delays, waitForEvent
	// timeouts, step timeouts) before it is waited; recorded values stay unscaled. 1 when 0.
	// Tests use it to keep real processes without waiting real minutes.
	TimeScale float64
	// RetentionSweep is how often finished instances past their retention are deleted
	// (1 minute when 0).
	RetentionSweep time.Duration
	// DispatchRetry is the pause before a run is dispatched again after its run could not
	// reach workerd or the store failed to commit (200 ms when 0); it doubles with each
	// failure in a row, up to 30 s.
	DispatchRetry time.Duration
	// Logf logs engine events (nothing when nil).
	Logf func(format string, args ...any)
}

// withDefaults fills o's zero fields with their defaults.
func (o Options) withDefaults() Options {
	if o.Profile == "" {
		o.Profile = limits.DefaultProfile
	}
	if o.Table == nil {
		o.Table = limits.Default()
	}
	if o.TimeScale <= 0 {
		o.TimeScale = 1
	}
	if o.RetentionSweep <= 0 {
		o.RetentionSweep = time.Minute
	}
	if o.DispatchRetry <= 0 {
		o.DispatchRetry = 200 * time.Millisecond
	}
	o.RunnerURL = strings.TrimSuffix(o.RunnerURL, "/")
	return o
}

// LoadOptionsFile reads an api.FileConfig into Options (DataDir and Logf left to the caller).
// runnerURL, when not empty, replaces the file's runnerURL (`sidecar
// --workflows-runner-url`: the pod IP is known only in the pod, as $(POD_IP) in args).
// Errors name the file and the field.
func LoadOptionsFile(path, runnerURL string) (Options, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Options{}, fmt.Errorf("workflows: --workflows-config: %w", err)
	}
	var c api.FileConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return Options{}, fmt.Errorf("workflows: --workflows-config %s: %w", path, err)
	}
	if runnerURL != "" {
		c.RunnerURL = runnerURL
	}
	if c.RunnerURL == "" {
		return Options{}, fmt.Errorf("workflows: --workflows-config %s: runnerURL is required (or --workflows-runner-url) (the workerd `workflows` socket, e.g. http://$(POD_IP):%d)", path, podcontract.RunnerPort)
	}
	o := Options{RunnerURL: c.RunnerURL, Workflows: c.Workflows}
	if c.Profile != "" {
		p, err := limits.ParseProfile(c.Profile)
		if err != nil {
			return Options{}, fmt.Errorf("workflows: --workflows-config %s: profile: %w", path, err)
		}
		o.Profile = p
	}
	return o, nil
}
