package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Shard pod storage: one PVC per shard (volumeClaimTemplate "data"), mounted by
// workerd at /var/lib/workerd/do (subPath "do", the localDisk directory) and by the
// sidecar at /var/lib/workerd-operator (subPath "sidecar").
const (
	shardDataVolume    = "data"
	shardDOSubPath     = "do"
	shardSidecarSubDir = "sidecar"
	// DefaultShardStorage is the PVC size when spec.storage.size is unset (api StorageSpec).
	DefaultShardStorage = "1Gi"
)

// DONSChildren are the objects a DurableObjectNamespace owns.
type DONSChildren struct {
	ConfigMap   *corev1.ConfigMap
	StatefulSet *appsv1.StatefulSet
	Service     *corev1.Service
}

func donsOwnerRef(d *fleetv1alpha1.DurableObjectNamespace) metav1.OwnerReference {
	return *metav1.NewControllerRef(d, fleetv1alpha1.GroupVersion.WithKind("DurableObjectNamespace"))
}

func donsLabels(d *fleetv1alpha1.DurableObjectNamespace) map[string]string {
	return commonLabels(podcontract.ComponentDOShard, podcontract.LabelDONS, d.Name)
}

func donsSelector(d *fleetv1alpha1.DurableObjectNamespace) map[string]string {
	return selectorLabels(podcontract.ComponentDOShard, podcontract.LabelDONS, d.Name)
}

// BuildDONSChildren builds the ConfigMap, StatefulSet and headless Service of a
// DurableObjectNamespace d whose class lives in Worker w, from the shard pods' rendered
// config (render.Render with Input.Host = d.Name). The pod template is the Worker
// pod's (same containers, security context, probes, scheduling fields) with the shard
// additions: ShardArgs, POD_NAME, the gateway port and the PVC. Pure: no API calls.
func BuildDONSChildren(d *fleetv1alpha1.DurableObjectNamespace, w *fleetv1alpha1.Worker, out *render.Output, inputsHash string, opts Options) DONSChildren {
	cm, sts, svc := buildShardSet(w, out, inputsHash, opts, shardSetParams{
		name: render.ShardSetName(d.Name), namespace: d.Namespace,
		labels: donsLabels(d), selector: donsSelector(d), owner: donsOwnerRef(d),
		replicas: render.Shards(d), storage: d.Spec.Storage,
		port: corev1.ServicePort{
			Name: podcontract.GatewaySocket, Port: podcontract.GatewayPort,
			TargetPort: intstr.FromString(podcontract.GatewaySocket), Protocol: corev1.ProtocolTCP,
		},
		workerdArgs:   render.ShardArgs(w),
		workerdPorts:  []corev1.ContainerPort{{Name: podcontract.GatewaySocket, ContainerPort: podcontract.GatewayPort, Protocol: corev1.ProtocolTCP}},
		workerdMounts: []corev1.VolumeMount{{Name: shardDataVolume, MountPath: render.DOStorageDir, SubPath: shardDOSubPath}},
		sidecarArgs:   channelLimitArgs(d.Spec.Channels),
	})
	return DONSChildren{ConfigMap: cm, StatefulSet: sts, Service: svc}
}

// channelLimitArgs are the sidecar flags lowering the channel limits of a shard
// (spec.channels.max*, docs/channels.md "Limits"); none when channels are off or no
// limit is set. The sidecar refuses values above its profile at startup.
func channelLimitArgs(c *fleetv1alpha1.ChannelsSpec) []string {
	if c == nil || !c.Enabled {
		return nil
	}
	var args []string
	for _, f := range []struct {
		flag string
		v    *int32
	}{
		{"channel-max-channels", c.MaxChannels},
		{"channel-max-subscribers", c.MaxSubscribers},
		{"channel-max-message-bytes", c.MaxMessageBytes},
		{"channel-max-backlog-bytes", c.MaxBacklogBytes},
	} {
		if f.v != nil {
			args = append(args, fmt.Sprintf("--%s=%d", f.flag, *f.v))
		}
	}
	return args
}

// resolveDurableObjects reads the DurableObjectNamespaces w binds (and host, when
// non-nil) into renderer targets. A missing one is an *errBlocked naming the binding.
func resolveDurableObjects(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, host *fleetv1alpha1.DurableObjectNamespace, opts Options) (map[string]render.DurableObjectTarget, error) {
	out := map[string]render.DurableObjectTarget{}
	ropts := render.Options{ClusterDomain: opts.ClusterDomain}
	if host != nil {
		t, err := render.TargetFor(host, ropts)
		if err != nil {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: err.Error()}
		}
		out[host.Name] = t
	}
	for i, b := range w.Spec.Bindings {
		kind, name := b.Reference()
		if kind != fleetv1alpha1.ReferenceDurableObjectNamespace {
			continue
		}
		if _, done := out[name]; done {
			continue
		}
		d := &fleetv1alpha1.DurableObjectNamespace{}
		err := c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: name}, d)
		if apierrors.IsNotFound(err) {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonReferenceNotFound,
				message: fmt.Sprintf("spec.bindings[%d] (%s): DurableObjectNamespace %q not found in namespace %q", i, b.Name, name, w.Namespace)}
		}
		if err != nil {
			return nil, err
		}
		t, err := render.TargetFor(d, ropts)
		if err != nil {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: fmt.Sprintf("spec.bindings[%d] (%s): %v", i, b.Name, err)}
		}
		out[d.Name] = t
	}
	return out, nil
}
