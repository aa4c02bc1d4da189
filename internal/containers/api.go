// Package containers is the manager's containers API: a shard pod's sidecar, which
// serves workerd's Docker API (internal/sidecar/containers), asks the manager to run
// each container instance as a Pod. The sidecar runs next to tenant code, so it holds
// no right to create pods; the manager authenticates it by its pod's internal
// certificate (docs/security-internal-plane.md), checks the request against the
// DurableObjectNamespace's spec.container and runs a Pod it builds itself
// (specs.BuildContainerPod). This file is the wire format and the sidecar's Client;
// server.go the manager's Handler.
package containers

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Paths of the API (all POST, JSON bodies).
const (
	StartPath  = "/containers/v1/start"
	WaitPath   = "/containers/v1/wait"
	StopPath   = "/containers/v1/stop"
	RemovePath = "/containers/v1/remove"
)

// ExitCodeGone is the exit code Wait reports for an instance whose pod disappeared
// before its container terminated: killed, as Docker reports SIGKILL (128+9).
const ExitCodeGone = 137

// StartRequest asks for an instance of a DurableObjectNamespace of the caller's
// namespace (the namespace its certificate names).
type StartRequest struct {
	// DurableObjectNamespace is the DurableObjectNamespace's name.
	DurableObjectNamespace string `json:"durableObjectNamespace"`
	// ShardPod is the calling shard pod's name: the instance pod's owner.
	ShardPod string `json:"shardPod"`
	// Name is the Docker name workerd chose; it may be long and not a DNS name.
	Name  string `json:"name"`
	Image string `json:"image"`
	// Args are Docker's Cmd.
	Args []string `json:"args,omitempty"`
	// Env are "K=V" entries.
	Env      []string `json:"env,omitempty"`
	Internet bool     `json:"internet"`
}

// StartResponse names the running instance's pod and the host its ports are reached at.
type StartResponse struct {
	Pod string `json:"pod"`
	// Host is the pod's IP.
	Host string `json:"host"`
}

// InstanceRequest names an instance of the caller's namespace.
type InstanceRequest struct {
	ShardPod string `json:"shardPod"`
	Name     string `json:"name"`
	// GraceSeconds is Stop's grace period.
	GraceSeconds int64 `json:"graceSeconds,omitempty"`
}

// WaitResponse is the exit code of an instance that terminated.
type WaitResponse struct {
	ExitCode int `json:"exitCode"`
}

// errorBody is every error's body.
type errorBody struct {
	Message string `json:"message"`
}

// Error is a refusal or failure the server reported: its HTTP status and message.
type Error struct {
	StatusCode int
	Message    string
}

func (e *Error) Error() string { return e.Message }

// StatusCode is the HTTP status of err when the server reported it, else 0.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// Client calls the containers API.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient calls the API at baseURL (podcontract.ContainersAPIURL) over TLS with
// tlsConfig: the pod's internal certificate, trusting the manager's CA.
func NewClient(baseURL string, tlsConfig *tls.Config) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	tr.ForceAttemptHTTP2 = false
	// No client timeout: Start waits for a pod to run and Wait long-polls; callers bound
	// them with their contexts.
	return &Client{base: strings.TrimSuffix(baseURL, "/"), hc: &http.Client{Transport: tr}}
}

// Start creates the instance's Pod, or finds it running, and returns once it runs with
// an IP.
func (c *Client) Start(ctx context.Context, r StartRequest) (StartResponse, error) {
	var out StartResponse
	_, err := c.call(ctx, StartPath, r, &out)
	return out, err
}

// Wait blocks until the instance's container has terminated and returns its exit code
// (ExitCodeGone when the pod went away first). The server answers each call within a
// bounded time, 204 meaning "still running"; Wait asks again until ctx ends.
func (c *Client) Wait(ctx context.Context, shardPod, name string) (int, error) {
	for {
		var out WaitResponse
		status, err := c.call(ctx, WaitPath, InstanceRequest{ShardPod: shardPod, Name: name}, &out)
		if err != nil {
			return 0, err
		}
		if status == http.StatusOK {
			return out.ExitCode, nil
		}
	}
}

// Stop deletes the instance's pod with grace as its grace period: the kubelet sends the
// image's stop signal, then SIGKILL after grace (Kubernetes cannot send a signal alone).
func (c *Client) Stop(ctx context.Context, shardPod, name string, grace time.Duration) error {
	_, err := c.call(ctx, StopPath, InstanceRequest{ShardPod: shardPod, Name: name, GraceSeconds: int64(grace / time.Second)}, nil)
	return err
}

// Remove deletes the instance's pod at once and returns once it is gone; an unknown
// instance is not an error.
func (c *Client) Remove(ctx context.Context, shardPod, name string) error {
	_, err := c.call(ctx, RemovePath, InstanceRequest{ShardPod: shardPod, Name: name}, nil)
	return err
}

// call POSTs in as JSON to path and decodes a 200 answer into out; it returns the
// status, or an *Error with the server's message.
func (c *Client) call(ctx context.Context, path string, in, out any) (int, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("containers API %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("containers API %s: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK && out != nil:
		if err := json.Unmarshal(data, out); err != nil {
			return 0, fmt.Errorf("containers API %s: %w", path, err)
		}
		return resp.StatusCode, nil
	case resp.StatusCode < 300:
		return resp.StatusCode, nil
	}
	var e errorBody
	if json.Unmarshal(data, &e) != nil || e.Message == "" {
		e.Message = fmt.Sprintf("containers API %s: %s: %s", path, resp.Status, strings.TrimSpace(string(data)))
	}
	return resp.StatusCode, &Error{StatusCode: resp.StatusCode, Message: e.Message}
}
