package specs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Shard pod storage: one PVC per shard (volumeClaimTemplate "data"), mounted by
// workerd at /var/lib/workerd/do (subPath "do", the localDisk directory) and by the
// sidecar at /var/lib/workerd-operator (subPath "sidecar").
const (
	shardDataVolume    = "data"
	shardDOSubPath     = "do"
	shardSidecarSubDir = podcontract.SidecarContainer // the sidecar's subPath of the PVC
	// DefaultShardStorage is the PVC size when spec.storage.size is unset (api StorageSpec).
	DefaultShardStorage = "1Gi"
)

func donsOwnerRef(d *fleetv1alpha1.DurableObjectNamespace) metav1.OwnerReference {
	return *metav1.NewControllerRef(d, fleetv1alpha1.GroupVersion.WithKind("DurableObjectNamespace"))
}

func donsLabels(d *fleetv1alpha1.DurableObjectNamespace) map[string]string {
	return commonLabels(podcontract.ComponentDOShard, podcontract.LabelDONS, d.Name)
}

// BuildDONSChildren builds the ConfigMap, StatefulSet, headless Service and NetworkPolicy of a
// DurableObjectNamespace d whose class lives in Worker w, from the shard pods' rendered
// config (render.Render with Input.Host = d.Name). The pod template is the Worker
// pod's (same containers, security context, probes, scheduling fields) with the shard
// additions: ShardArgs, POD_NAME, the gateway port, the PVC and a preStop hook that
// drains the gateway (render.GatewayDrainPath on the health socket). Pure: no API calls.
func BuildDONSChildren(d *fleetv1alpha1.DurableObjectNamespace, w *fleetv1alpha1.Worker, out *render.Output, inputsHash string, opts Options) ShardSet {
	return buildShardSet(w, out, inputsHash, opts, shardSetParams{
		name: render.ShardSetName(d.Name), namespace: d.Namespace,
		labels: donsLabels(d), selector: DONSSelector(d), owner: donsOwnerRef(d),
		replicas: d.ShardSetReplicas(), storage: d.Spec.Storage,
		port: corev1.ServicePort{
			Name: podcontract.GatewaySocket, Port: podcontract.GatewayPort,
			TargetPort: intstr.FromString(podcontract.GatewaySocket), Protocol: corev1.ProtocolTCP,
		},
		workerdArgs:   render.ShardArgs(w),
		workerdPorts:  []corev1.ContainerPort{{Name: podcontract.GatewaySocket, ContainerPort: podcontract.GatewayPort, Protocol: corev1.ProtocolTCP}},
		workerdMounts: []corev1.VolumeMount{{Name: shardDataVolume, MountPath: render.DOStorageDir, SubPath: shardDOSubPath}},
		sidecarArgs:   channelLimitArgs(d.Spec.Channels),
		backup:        DONSBackup(d),
		container:     d.Spec.Container, containerOwner: d.Name,
		// The gateway stops opening sessions and answers once no call is in flight
		// (shim gateway.js); callers wait for the successor meanwhile. The hook goes
		// through the health socket, which forwards the drain path to the gateway: the
		// kubelet has no client certificate for the gateway socket, so the hook proves it
		// comes from the pod's spec with the drain token instead.
		preStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: render.GatewayDrainPath, Port: intstr.FromString(podcontract.HealthPortName), Scheme: corev1.URISchemeHTTP,
			HTTPHeaders: []corev1.HTTPHeader{{Name: render.DrainTokenHeader, Value: render.DrainToken(d)}},
		}},
	})
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

// DONSBackup is d's spec.backup and spec.restore as its shard pods need them.
func DONSBackup(d *fleetv1alpha1.DurableObjectNamespace) StoreBackup {
	b := StoreBackup{Backup: d.Spec.Backup, Restore: d.Spec.Restore, Path: d.BackupPath(), Shards: d.ShardSetShards(), Reshard: reshardOf(d)}
	if r := d.Status.Resharding; r != nil && r.Backup != nil {
		// The objects move through the backup the old shards shipped to.
		b.Backup, b.Path = r.Backup, d.BackupPathOf(r.Backup)
	}
	return b
}

// reshardOf is the latest change of d's shard count as its restore init container
// needs it: the count objects move from and when the old set began to stop.
func reshardOf(d *fleetv1alpha1.DurableObjectNamespace) *backup.Reshard {
	r := d.LatestReshard()
	if r == nil {
		return nil
	}
	rs := &backup.Reshard{From: r.From, Since: r.StartedAt.Time}
	if d.Status.Resharding != nil {
		// Only while the change is under way: a finished one does not roll the shards.
		rs.Unsealed, _ = d.UnsealedShards(r.From) // the controller refuses a bad list first
	}
	return rs
}
