// Package sidecar is the per-pod sidecar server next to workerd
// (docs/pod-contract.md): HTTP on $(POD_IP):9092, reached by workerd as the `external`
// service `sidecar`. It serves GET /healthz, GET /metrics (Prometheus) and the sub-APIs:
// /channels/... (package channels, docs/channels.md) and whatever other packages mount
// with Server.Handle (the workflow engine mounts /workflows/...). State lives under the
// data directory (default /var/lib/workerd-operator, the shard's PVC or an emptyDir).
package sidecar
