// Package failure names why a workerd pod or a Durable Object call died.
//
// It implements the failure taxonomy docs/failures.md describes (the call classes and
// causes of the @nimbus-sh/platform package's `classifyDoCall` and `classifyError`) for
// the operator, plus causes of its own for what workerd prints when a config does not
// load (`service <name>: ...`, workerd's Server::ConfigErrorReporter) and when the
// outbound policy refuses a connection (outbound_denied):
//
//   - ClassifyCall(err) → Class: how a failed Durable Object call relates to a retry
//     (superseded_isolate, connection_lost, storage_reset, retryable_flag, overloaded,
//     permanent). overloaded is checked first, on every link of the cause chain, and
//     vetoes the rest; IsRetryable says which classes a retry may act on.
//   - ClassifyError(err) / ClassifyMessage(msg) → Cause: which limit or condition a
//     message names (sqlite_nomem, sqlite_full, oom, cpu_exceeded, clone_refused,
//     rpc_timeout, subrequest_cap, dynamic_worker_cap, condemnation, hard_evict,
//     unknown).
//   - ClassifyTermination(t) / Diagnose(t) → Cause (+ evidence): what a dead container
//     left behind — exit code, signal, container reason (OOMKilled), pod reason
//     (Evicted), termination message (pods use terminationMessagePolicy
//     FallbackToLogsOnError, so this is the tail of the log) and log lines — adding
//     startup_error and config_error.
//   - ClassifyPod(pod) / ClassifyPods(pods) → *Failure: the most relevant abnormally terminated container of
//     a pod, ready for status.lastFailure (Failure.Status) and the Degraded condition
//     (reason = string(Failure.Cause)); Failure.Condition builds that condition and
//     Failure.Summary the Event message.
//   - ClassifyLog(pod, container, log, after) → *Failure: the newest failure workerd
//     itself logged (its error lines; not the Worker's console output) in a container
//     that runs on — a connection the outbound policy refused, a subrequest cap, a
//     timeout — read after a time; the operator's log scan (controllers/common
//     LogScanner) feeds it. Merge(pods, recorded, logged) settles status.lastFailure and
//     the failure that makes the object Degraded from the terminations and the logs.
//   - Retry(ctx, policy, fn) / Backoff: the retry loop the router and the workflow
//     engine use — only retryable classes, exponential backoff, never overloaded.
//
// Every Class and Cause value is a valid metav1.Condition reason
// (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`).
//
// The JavaScript twin internal/shim/failure.js (classifyCall, isRetryable,
// classifyError, classifyTermination, backoff, callWithRetry) implements the same rules for the router and the
// step runtime; testdata/vectors.json drives both, and the tests check that Go and the
// JavaScript running inside the pinned workerd agree on every vector. Change the rules
// in both files together. docs/failures.md says what produces each cause and what the
// operator does about it.
package failure
