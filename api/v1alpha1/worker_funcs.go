package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
)

// LatestVersion in spec.deployment names the version of the spec it is part of.
const LatestVersion = "latest"

// VersionedSpec is what a version of the Worker holds: the spec without what applies
// to every version alike (replicas, pod, service) and without the deployment.
func (s *WorkerSpec) VersionedSpec() WorkerSpec {
	v := *s.DeepCopy()
	v.Replicas, v.Pod, v.Service, v.Deployment = nil, nil, nil, nil
	return v
}

// VersionID is the id of the spec's version: a content hash of VersionedSpec, so the
// same code, bindings and settings are the same version. The order of the lists that
// are sets or maps (flags, bindings, tails, outbound rules) does not count.
func (s *WorkerSpec) VersionID() string {
	v := s.VersionedSpec()
	slices.Sort(v.CompatibilityFlags)
	slices.SortFunc(v.Bindings, func(a, b Binding) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(v.Tails, func(a, b TailConsumer) int { return strings.Compare(a.Service, b.Service) })
	if v.Outbound != nil {
		slices.Sort(v.Outbound.Allow)
		slices.Sort(v.Outbound.Deny)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a WorkerSpec always marshals
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// DeployedVersions are the versions spec.deployment names, "latest" resolved to the
// spec's own version; without spec.deployment, the spec's version at 100 percent.
func (s *WorkerSpec) DeployedVersions() []DeploymentVersion {
	if s.Deployment == nil || len(s.Deployment.Versions) == 0 {
		return []DeploymentVersion{{VersionID: s.VersionID(), Percentage: 100}}
	}
	out := make([]DeploymentVersion, len(s.Deployment.Versions))
	for i, v := range s.Deployment.Versions {
		if v.VersionID == LatestVersion {
			v.VersionID = s.VersionID()
		}
		out[i] = v
	}
	return out
}

// PrimaryVersion is the deployed version with the largest share (the first listed on
// a tie): it runs in the Worker's own Deployment and hosts its Durable Objects and
// Workflows (docs/versions.md).
func PrimaryVersion(deployed []DeploymentVersion) DeploymentVersion {
	best := deployed[0]
	for _, v := range deployed[1:] {
		if v.Percentage > best.Percentage {
			best = v
		}
	}
	return best
}

// SharedUserWorker reports whether the Worker is a user Worker that runs as an isolate
// in its dispatch Workers' pods (spec.dispatchPlacement Shared) and so has no pods,
// Services or ConfigMaps of its own.
func (w *Worker) SharedUserWorker() bool {
	return w.Spec.DispatchNamespace != "" && w.Spec.DispatchPlacement == DispatchPlacementShared
}

// Shared user Workers in a dispatch Worker's pods.
const (
	// DefaultMaxSharedWorkers is a dispatchNamespace binding's maxSharedWorkers default.
	DefaultMaxSharedWorkers = 100
	// SharedWorkerMiB is the memory a loaded Shared user Worker's isolate holds at rest
	// with headroom: 2.1 MiB measured for a small Worker with the pinned workerd
	// (docs/benchmarks.md).
	SharedWorkerMiB = 3
)

// MaxSharedWorkers is the binding's maxSharedWorkers or its default.
func (b *DispatchNamespaceBinding) MaxSharedWorkers() int32 {
	if b.MaxShared != nil {
		return *b.MaxShared
	}
	return DefaultMaxSharedWorkers
}

// SharedWorkersMiB is the memory w's workerd container gets beside its own for the
// Shared user Workers its dispatchNamespace bindings load.
func (w *Worker) SharedWorkersMiB() int64 {
	var n int64
	for _, b := range w.Spec.Bindings {
		if b.DispatchNamespace != nil {
			n += int64(b.DispatchNamespace.MaxSharedWorkers())
		}
	}
	return n * SharedWorkerMiB
}
