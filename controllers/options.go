package controllers

import "fmt"

// Options are the manager-wide settings the builders use.
type Options struct {
	// WorkerdImage is the image of the pinned workerd, e.g.
	// "ghcr.io/workerd-operator/workerd:1.20261117.1".
	WorkerdImage string
	// WorkerdImageRepository is used with spec.runtime.version:
	// "<repository>:<version>".
	WorkerdImageRepository string
	// OperatorImage runs the sidecar (the manager's own image).
	OperatorImage string
	// ClusterDomain of in-cluster DNS names. Default "cluster.local".
	ClusterDomain string
	// PreStopSeconds is the preStop sleep that lets endpoints drop the pod before
	// workerd closes its listeners. Default 5.
	PreStopSeconds int64
	// DrainSeconds is how long workerd may finish in-flight requests after SIGTERM
	// (it waits without a timeout of its own, workerd-facts.md §5.2). Default 30, the
	// length of Cloudflare's waitUntil budget after a response.
	DrainSeconds int64
}

// DefaultOptions are the defaults of the manager's flags.
func DefaultOptions() Options {
	return Options{
		WorkerdImage:           "ghcr.io/workerd-operator/workerd:1.20261117.1",
		WorkerdImageRepository: "ghcr.io/workerd-operator/workerd",
		OperatorImage:          "ghcr.io/workerd-operator/workerd-operator:dev",
		ClusterDomain:          "cluster.local",
		PreStopSeconds:         5,
		DrainSeconds:           30,
	}
}

func (o Options) workerdImage(version, image string) string {
	switch {
	case image != "":
		return image
	case version != "":
		return fmt.Sprintf("%s:%s", o.WorkerdImageRepository, version)
	default:
		return o.WorkerdImage
	}
}
