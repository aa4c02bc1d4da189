// Package controllers holds one reconciler per kind of fleet.workerd-operator.io and
// the pure builder functions that turn a spec into its child objects.
//
// Every reconciler follows the same shape: fetch the object, guard (deleted, paused),
// then small reconcileX steps that server-side apply children with one field owner
// (podcontract.FieldOwner) and owner references, and finally one status write computed in one
// place. status.observedGeneration is set only after a pass in which every step
// succeeded. Builders (worker_builders.go, ...) are pure functions, unit-tested
// without an API server; the reconcilers are tested on a real API server (envtest).
package controller
