package workflows

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// FileConfig is the engine's config file (JSON), for `workerd-operator sidecar
// --workflows-config <path>` (docs/workflows.md "Wiring"):
//
//	{"runnerURL": "http://10.0.0.5:9094", "profile": "paid",
//	 "workflows": [{"name": "orders", "steps": 10000, "concurrency": 50,
//	                "defaults": {"limit": 5, "delayMs": 10000, "backoff": "exponential", "timeoutMs": 600000}}]}
type FileConfig struct {
	RunnerURL string           `json:"runnerURL"`
	Profile   string           `json:"profile,omitempty"`
	Workflows []WorkflowConfig `json:"workflows"`
}

// LoadOptionsFile reads a FileConfig into Options (DataDir and Logf left to the caller).
// runnerURL, when not empty, replaces the file's runnerURL (`sidecar
// --workflows-runner-url`: the pod IP is known only in the pod, as $(POD_IP) in args).
// Errors name the file and the field.
func LoadOptionsFile(path, runnerURL string) (Options, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Options{}, fmt.Errorf("workflows: --workflows-config: %w", err)
	}
	var c FileConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return Options{}, fmt.Errorf("workflows: --workflows-config %s: %w", path, err)
	}
	if runnerURL != "" {
		c.RunnerURL = runnerURL
	}
	if c.RunnerURL == "" {
		return Options{}, fmt.Errorf("workflows: --workflows-config %s: runnerURL is required (or --workflows-runner-url) (the workerd `workflows` socket, e.g. http://$(POD_IP):9094)", path)
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
