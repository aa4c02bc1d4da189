// Package api is the Workflows engine's HTTP API as its clients see it: the wire types,
// the engine's config file, and Client, the one client of the API (used by the
// Workflow controller, the cron starter and the `workflows` subcommand). The engine
// (internal/workflows) serves it; docs/workflows.md describes the routes.
package api

import (
	"encoding/json"
	"fmt"
)

// PathPrefix is where the engine's API is mounted on the sidecar.
const PathPrefix = "/workflows/"

// NotProcessedHeader marks an answer (503, code "engine.stopping") to a request the
// engine refused without acting on it, because its sidecar is stopping: a client may
// send it again, to the engine's successor.
const NotProcessedHeader = "X-Workerd-Operator-Not-Processed"

// Instance statuses, as Cloudflare's InstanceStatus.
const (
	StatusQueued          = "queued"
	StatusRunning         = "running"
	StatusPaused          = "paused"
	StatusErrored         = "errored"
	StatusTerminated      = "terminated"
	StatusComplete        = "complete"
	StatusWaitingForPause = "waitingForPause"
	StatusWaiting         = "waiting"
)

// Statuses lists every status, in the order of the numeric codes of the local engine.
var Statuses = []string{StatusQueued, StatusRunning, StatusPaused, StatusErrored, StatusTerminated, StatusComplete, StatusWaitingForPause, StatusWaiting}

// Finite reports whether s is a final status (complete, errored, terminated).
func Finite(s string) bool {
	return s == StatusComplete || s == StatusErrored || s == StatusTerminated
}

// ErrorInfo is an error as Workers sees it: {name, message}.
type ErrorInfo struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// Instance is one workflow instance (the engine's stored record).
type Instance struct {
	Workflow string          `json:"workflow"`
	ID       string          `json:"id"`
	Seq      uint64          `json:"seq"` // creation order
	Status   string          `json:"status"`
	Params   json.RawMessage `json:"params,omitempty"`
	Created  int64           `json:"createdMs"` // ms since the epoch
	// Started is the first dispatch (ms since the epoch; 0 before).
	Started int64           `json:"startedMs,omitempty"`
	Ended   int64           `json:"endedMs,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   *ErrorInfo      `json:"error,omitempty"`
	// RunID fences dispatches: only the run with the current id may commit.
	RunID uint64 `json:"runId"`
	// WakeAt is when a waiting instance is woken (ms since the epoch; 0 = only by an event).
	WakeAt int64 `json:"wakeAtMs,omitempty"`
	// WaitType is the event type a waiting instance waits for ("" when sleeping).
	WaitType string `json:"waitType,omitempty"`
	// TerminateRequested is when terminate() was called on an instance with step.do
	// attempts in flight (ms since the epoch; 0 = none pending): its status stays until
	// they have settled and their results are committed, then it is terminated.
	TerminateRequested int64 `json:"terminateRequestedMs,omitempty"`
	// Steps counts the step.do steps started (sleeps and waits do not count).
	Steps int `json:"steps"`
	// StartOrder is the order of the first dispatch among all instances (1-based; 0 before).
	StartOrder uint64 `json:"startOrder,omitempty"`
	// Dispatches counts runs started (replays included).
	Dispatches int `json:"dispatches"`
	// Schedule and ScheduledMs: the cron firing that created the instance (CreateOptions).
	Schedule    string `json:"schedule,omitempty"`
	ScheduledMs int64  `json:"scheduledMs,omitempty"`
}

// Attempt is one recorded attempt of a step.do.
type Attempt struct {
	N     int        `json:"attempt"`
	Start int64      `json:"startMs"`
	End   int64      `json:"endMs"`
	Error *ErrorInfo `json:"error,omitempty"`
	// RetryDelayMs is the engine's delay before the next attempt (unscaled, as the step
	// config computes it); absent when no retry follows.
	RetryDelayMs *int64 `json:"retryDelayMs,omitempty"`
}

// Step is one step call of an instance (kind do, sleep or waitForEvent; name +
// occurrence count N).
type Step struct {
	Kind   string          `json:"kind"`
	Name   string          `json:"name"`
	N      int             `json:"count"`
	Done   bool            `json:"done"`
	Result json.RawMessage `json:"result,omitempty"` // JSON; absent = undefined
	Error  *ErrorInfo      `json:"error,omitempty"`
	// Attempts (do only).
	Attempts []Attempt `json:"attempts,omitempty"`
	// WakeAt: sleep deadline, next retry, or waitForEvent deadline (ms since the epoch).
	WakeAt int64 `json:"wakeAtMs,omitempty"`
	// Config is the resolved config (do) or {timeout} (waitForEvent).
	Config *StepConfig `json:"config,omitempty"`
	// CommittedAt is when Done was committed (ms since the epoch).
	CommittedAt int64 `json:"committedMs,omitempty"`
}

// StepConfig is a step's resolved config: retries {limit, delay ms, backoff}, timeout ms per attempt.
type StepConfig struct {
	Retries struct {
		Limit   int    `json:"limit"`
		DelayMs int64  `json:"delay"`
		Backoff string `json:"backoff"`
	} `json:"retries"`
	TimeoutMs int64 `json:"timeout"`
}

// DelayMs is the wait after failed attempt n (1-based) under this config: exponential
// delay × 2^(n−1), linear delay × n, constant delay (as Cloudflare's engine computes it).
func (c StepConfig) DelayMs(n int) int64 { return c.Backoff(c.Retries.DelayMs, n) }

// Backoff is the wait after failed attempt n (1-based) for a base delay d under this
// config's backoff.
func (c StepConfig) Backoff(d int64, n int) int64 {
	switch c.Retries.Backoff {
	case "exponential":
		for i := 1; i < n; i++ {
			d *= 2
		}
		return d
	case "linear":
		return d * int64(n)
	}
	return d
}

// CreateOptions are create()'s options: id (generated UUID when empty) and params (JSON).
type CreateOptions struct {
	ID     string          `json:"id,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	// Schedule and ScheduledMs are set for an instance created by a cron firing (a
	// CronSchedule with a workflowRef target): the run's event gets `schedule` (the cron
	// expression) and its `timestamp` is the slot's scheduledTime (ms since the epoch).
	Schedule    string `json:"schedule,omitempty"`
	ScheduledMs int64  `json:"scheduledMs,omitempty"`
}

// BatchError is one failed entry of a batch create.
type BatchError struct {
	Index   int    `json:"index"`
	ID      string `json:"id,omitempty"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// StepPage is one page of an instance's steps.
type StepPage struct {
	Steps []Step `json:"steps"`
	// Cursor continues the steps (absent on the last page).
	Cursor string `json:"cursor,omitempty"`
}

// ListPage is one page of a listing.
type ListPage struct {
	Instances []*Instance `json:"instances"`
	// Cursor continues the listing (absent on the last page).
	Cursor string `json:"cursor,omitempty"`
}

// Stats are a workflow's counters: instances per status, runs in flight now and the
// most ever in flight since the engine started.
type Stats struct {
	Counts      map[string]int `json:"counts"`
	Inflight    int            `json:"inflight"`
	MaxInflight int            `json:"maxInflight"`
	Concurrency int            `json:"concurrency"`
	Steps       int            `json:"steps"`
}

// BulkResult is the answer of a bulk terminate or delete: the ids done and one error
// per id that failed.
type BulkResult struct {
	Done   []string    `json:"done"`
	Errors []BulkError `json:"errors"`
}

// BulkError is one failed id of a bulk operation.
type BulkError struct {
	ID      string `json:"id"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// APIError is an error answer of the API: an HTTP status and a stable code. On the
// wire it is {"error": {"code", "message"}}.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string { return e.Message }

// Errorf makes an APIError.
func Errorf(status int, code, format string, a ...any) *APIError {
	return &APIError{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

// Error codes the engine answers with that callers act on.
const (
	// CodeInstanceExists: create() with an id already in use.
	CodeInstanceExists = "10405"
)
