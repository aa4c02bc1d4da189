// Package workflows is the sidecar's Workflows engine, with Cloudflare Workflows
// semantics, and its HTTP API under /workflows/ (docs/workflows.md). Layout:
//
//   - internal/workflows: the engine (engine.go: lifecycle and scheduling; runtime.go:
//     the runner's step and attempt calls; runlink.go: a run's socket to the runner;
//     commit.go: the group commit; admit.go: how many runs start at once; config.go:
//     step configs and limits; http.go: the API server)
//   - internal/workflows/store: the bbolt store of instances, steps and events
//   - internal/workflows/api: the wire types, the engine's config file and Client, the
//     one client of the API
//   - internal/workflows/duration: the one WorkflowDuration grammar
//
// Instances live in a bbolt file (<data dir>/workflows.db, fsync on every commit): the
// instance record, one record per step (do, sleep, waitForEvent: name + occurrence count)
// and the events sent to it. Every acknowledged step result, event and state change is
// committed before the reply (concurrent changes share a commit), so a kill -9 of the
// sidecar or of workerd at any moment loses no acknowledged step and re-runs no
// completed step.
//
// Execution is by replay: the engine opens a WebSocket to the runner worker
// (internal/shim/workflows-runner.js) on workerd's internal `workflows` socket and sends
// {workflow, id, runId, event}; the runner calls the user's WorkflowEntrypoint
// run(event, step) with the step object of internal/shim/workflows-step.js. Each step
// call asks the engine over that socket (op "step"): a completed step is answered from
// the store; a new step.do is run by the runner and its result committed (op "attempt")
// before step.do returns. step.sleep, step.sleepUntil, step.waitForEvent and non-zero retry delays
// suspend the run: the instance goes to `waiting`, its concurrency slot is freed, and a
// timer or a matching event re-dispatches it (replay from the top). A run id per
// dispatch fences stale runs: after a crash, a run the engine no longer owns is aborted
// at its next step call and its results are never committed.
//
// Lifecycle: queued → running ⇄ waiting / waitingForPause → paused → complete | errored |
// terminated. At most WorkflowConfig.Concurrency instances run at once per workflow
// (waiting ones do not count), and no more than workerd keeps up with (admit.go); woken
// and recovered instances start first, then queued ones oldest first. Limits come from
// internal/limits.
package workflows
