package specs

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// shardBlobsSubPath is the PVC subPath of a KV host's large values (render.DataBlobsDir).
const shardBlobsSubPath = "kv-blobs"

// dataOwnerLabels maps a store kind to its API kind and owner label.
var dataOwnerLabels = map[render.DataKind]struct{ kind, label string }{
	render.DataKV:    {"KVNamespace", podcontract.LabelKVNamespace},
	render.DataD1:    {"D1Database", podcontract.LabelD1Database},
	render.DataQueue: {"Queue", podcontract.LabelQueue},
}

// DataStoreSelector selects the host pod (and ConfigMaps) of store name of kind.
func DataStoreSelector(kind render.DataKind, name string) map[string]string {
	return SelectorLabels(podcontract.ComponentDataStore, dataOwnerLabels[kind].label, name)
}

// BuildDataStoreChildren builds the host of a KVNamespace, D1Database or Queue owner
// (docs/kv.md "What the operator makes"): the ConfigMap of the rendered host config
// (render.Render of render.DataHostWorker(h) with Input.DataHost = h), a one-pod
// StatefulSet "<name>-<kind>" with a PVC holding the Durable Object storage (and KV's
// large values), a headless Service on the gateway port and the pod's NetworkPolicy.
// The pod is a Worker pod (same containers, sidecar, probes) of w: the store's own
// (render.DataHostWorker) or, for a Queue with a consumer, the consumer Worker. Pure.
func BuildDataStoreChildren(owner client.Object, h render.DataHost, w *fleetv1alpha1.Worker, storage *fleetv1alpha1.StorageSpec, bk StoreBackup, out *render.Output, inputsHash string, opts Options) ShardSet {
	bk.Shards, bk.Blobs = 1, h.Kind == render.DataKV
	info := dataOwnerLabels[h.Kind]
	mounts := []corev1.VolumeMount{{Name: shardDataVolume, MountPath: render.DOStorageDir, SubPath: shardDOSubPath}}
	if h.Kind == render.DataKV {
		mounts = append(mounts, corev1.VolumeMount{Name: shardDataVolume, MountPath: render.DataBlobsDir, SubPath: shardBlobsSubPath})
	}
	return buildShardSet(w, out, inputsHash, opts, shardSetParams{
		name: render.DataSetName(h.Kind, h.Name), namespace: h.Namespace,
		labels:   commonLabels(podcontract.ComponentDataStore, info.label, h.Name),
		selector: DataStoreSelector(h.Kind, h.Name),
		owner:    *metav1.NewControllerRef(owner, fleetv1alpha1.GroupVersion.WithKind(info.kind)),
		replicas: 1, storage: storage,
		port: corev1.ServicePort{
			Name: podcontract.GatewaySocket, Port: podcontract.GatewayPort,
			TargetPort: intstr.FromString(podcontract.GatewaySocket), Protocol: corev1.ProtocolTCP,
		},
		workerdArgs:   render.DataHostArgs(w, h.Kind),
		workerdPorts:  []corev1.ContainerPort{{Name: podcontract.GatewaySocket, ContainerPort: podcontract.GatewayPort, Protocol: corev1.ProtocolTCP}},
		workerdMounts: mounts,
		backup:        bk,
	})
}

// DataStoreOwnerLabel is the label naming the owner of a host pod of kind.
func DataStoreOwnerLabel(kind render.DataKind) string { return dataOwnerLabels[kind].label }
