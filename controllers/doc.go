// Package controller registers every reconciler of fleet.workerd-operator.io with a
// manager (SetupAll). The reconcilers live one per kind below it:
//
//   - worker: a Worker into its ConfigMap, Deployment and Services;
//   - durableobjectnamespace: a DurableObjectNamespace into its shard StatefulSet;
//   - workflow: a Workflow into its engine StatefulSet;
//   - cronschedule: the CronSchedule dispatcher (a leader-only Runnable);
//   - common: what they share (apply, status, conditions, resolving a Worker, field
//     indexes and watches, Events, ready pods).
//
// Every reconciler follows the same shape: fetch the object, guard (deleted), then
// small steps that server-side apply children built by internal/specs (pure builders)
// with one field owner (podcontract.FieldOwner) and owner references, and finally one
// status write computed in one place. status.observedGeneration is set only after a
// pass in which every step succeeded. A pass blocked on a missing input requeues with
// backoff, and the watches on what it reads wake it as soon as the input appears.
// The tests of this package run all reconcilers together on a real API server
// (envtest).
package controller
