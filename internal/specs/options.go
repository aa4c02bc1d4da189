package specs

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Options are the manager-wide settings the builders use (the manager's flags).
type Options struct {
	// WorkerdImage is the image of the pinned workerd, e.g.
	// podcontract.DefaultWorkerdImage.
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
	// (it waits without a timeout of its own). Default 30, the
	// length of Cloudflare's waitUntil budget after a response.
	DrainSeconds int64
	// NetworkPolicies: the reconcilers apply the NetworkPolicy of every Worker,
	// DurableObjectNamespace and Workflow (docs/security-internal-plane.md); off, they
	// delete the ones they made. Default on.
	NetworkPolicies bool
	// ManagerNamespace is the manager's namespace: the NetworkPolicies admit the
	// manager pods (podcontract.ManagerPodLabels) of this namespace to the trigger and
	// sidecar ports. Empty: they admit no pod as the manager.
	ManagerNamespace string
	// MetricsNamespace, when set, is the namespace of the metrics scraper (Prometheus):
	// the NetworkPolicies admit its pods to the sidecar port, where GET /metrics still
	// needs the namespace's client certificate (docs/observability.md).
	MetricsNamespace string
	// OTLPEndpoint, when set, is the OTLP/HTTP traces URL every workerd pod's sidecar
	// exports its invocation spans to (sidecar --otlp-endpoint, docs/observability.md).
	OTLPEndpoint string
	// NoInvocationMetrics renders Workers without the tail worker of their invocation
	// metrics (render.Options.NoInvocationMetrics).
	NoInvocationMetrics bool
	// Issuer keeps the namespaces' internal TLS Secrets the pods mount and makes the
	// manager's clients of the pods (docs/security-internal-plane.md). The manager
	// always sets it; the builders do not use it.
	Issuer *internalca.Issuer
	// ShardDrainSeconds is how long a Durable Object shard or Workflow engine pod may
	// finish in-flight calls once it is deleted; its grace period is PreStopSeconds +
	// ShardDrainSeconds. It is short because the pod is the only owner of its objects:
	// its successor starts only after it is gone, and callers wait for that (at most
	// 60 s, docs/durable-objects.md "Rollouts"). Default 10.
	ShardDrainSeconds int64
	// RuntimeClassName, when set, is every workerd pod's runtimeClassName: a sandboxed
	// runtime such as gVisor or Kata Containers (docs/security.md "Isolation").
	RuntimeClassName string
	// HostUsers false gives every workerd pod hostUsers: false (a user namespace of its
	// own; Kubernetes >= 1.33 and a runtime that supports it). Default true: unset.
	HostUsers bool
	// EmptyDirSizeLimit, when set, bounds each emptyDir of every workerd pod (/tmp and the
	// sidecar's store of Worker pods): the kubelet evicts a pod that writes more.
	EmptyDirSizeLimit *resource.Quantity
	// RequestCF is what every Worker pod's sidecar computes request.cf from
	// (docs/request-cf.md).
	RequestCF RequestCF
	// Outbound is the operator's outbound default: Allow for Workers without
	// spec.outbound.allow, Deny for every Worker (render.Options.Outbound,
	// docs/outbound.md). Default: outbound.DefaultAllow, no deny.
	Outbound outbound.Rules
}

// RequestCF are the manager's --request-cf-* flags, passed on to the sidecars.
type RequestCF struct {
	// Colo is request.cf.colo (sidecar --request-cf-colo); empty: absent.
	Colo string
	// TrustedProxies are CIDRs whose CF-Connecting-IP and X-Forwarded-For are believed
	// (sidecar --request-cf-trusted-proxies).
	TrustedProxies []string
	// GeoIPImage, when set, is an image of *.mmdb files mounted at
	// podcontract.GeoIPDir in the sidecar (sidecar --request-cf-geoip-dir).
	GeoIPImage string
}

// args are the sidecar's --request-cf-* flags.
func (r RequestCF) args() []string {
	var out []string
	if r.Colo != "" {
		out = append(out, "--request-cf-colo="+r.Colo)
	}
	if len(r.TrustedProxies) > 0 {
		out = append(out, "--request-cf-trusted-proxies="+strings.Join(r.TrustedProxies, ","))
	}
	if r.GeoIPImage != "" {
		out = append(out, "--request-cf-geoip-dir="+podcontract.GeoIPDir)
	}
	return out
}

// geoIPVolume is the pod volume of GeoIPImage and the sidecar's mount of it.
func (r RequestCF) geoIPVolume() (corev1.Volume, corev1.VolumeMount, bool) {
	if r.GeoIPImage == "" {
		return corev1.Volume{}, corev1.VolumeMount{}, false
	}
	const name = "request-cf-geoip"
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
			Reference: r.GeoIPImage, PullPolicy: corev1.PullIfNotPresent}}},
		corev1.VolumeMount{Name: name, MountPath: podcontract.GeoIPDir, ReadOnly: true}, true
}

// DefaultOptions are the defaults of the manager's flags.
func DefaultOptions() Options {
	return Options{
		WorkerdImage:           podcontract.DefaultWorkerdImage,
		WorkerdImageRepository: podcontract.WorkerdImageRepository,
		OperatorImage:          podcontract.DefaultOperatorImage,
		ClusterDomain:          render.DefaultClusterDomain,
		PreStopSeconds:         5,
		DrainSeconds:           30,
		ShardDrainSeconds:      10,
		NetworkPolicies:        true,
		Outbound:               outbound.Rules{Allow: outbound.DefaultAllow},
		HostUsers:              true,
	}
}

// workerGraceSeconds is a Worker pod's grace period: the preStop sleep, then time for an
// in-flight request that waits for a Durable Object shard or Workflow engine being
// replaced in the same rollout (render.OwnerWaitSeconds), then DrainSeconds for it to
// finish. workerd exits as soon as it has drained: the bound matters only to stuck
// requests.
func (o Options) workerGraceSeconds() int64 {
	return o.PreStopSeconds + render.OwnerWaitSeconds + o.DrainSeconds
}

// isolate applies the cluster admin's isolation settings to a workerd pod.
func (o Options) isolate(pod *corev1.PodSpec) {
	if o.RuntimeClassName != "" {
		pod.RuntimeClassName = ptr.To(o.RuntimeClassName)
	}
	if !o.HostUsers {
		pod.HostUsers = ptr.To(false)
	}
	if o.EmptyDirSizeLimit == nil {
		return
	}
	for i := range pod.Volumes {
		if d := pod.Volumes[i].EmptyDir; d != nil {
			d.SizeLimit = ptr.To(o.EmptyDirSizeLimit.DeepCopy())
		}
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
