package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/workerdconfig"
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
	return commonLabels(ComponentDOShard, LabelDONS, d.Name)
}

func donsSelector(d *fleetv1alpha1.DurableObjectNamespace) map[string]string {
	return selectorLabels(ComponentDOShard, LabelDONS, d.Name)
}

// donsConfigMapName is content-addressed like a Worker's: "<name>-do-<hash10>".
func donsConfigMapName(d *fleetv1alpha1.DurableObjectNamespace, version string) string {
	return fmt.Sprintf("%s-%s", workerdconfig.ShardSetName(d.Name), shortHash(version))
}

// BuildDONSChildren builds the ConfigMap, StatefulSet and headless Service of a
// DurableObjectNamespace d whose class lives in Worker w, from the shard pods' rendered
// config (workerdconfig.Render with Input.Host = d.Name). The pod template is the Worker
// pod's (same containers, security context, probes, scheduling fields) with the shard
// additions: ShardArgs, POD_NAME, the gateway port and the PVC. Pure: no API calls.
func BuildDONSChildren(d *fleetv1alpha1.DurableObjectNamespace, w *fleetv1alpha1.Worker, out *workerdconfig.Output, inputsHash string, opts Options) DONSChildren {
	labels := donsLabels(d)
	own := []metav1.OwnerReference{donsOwnerRef(d)}
	set := workerdconfig.ShardSetName(d.Name)

	cm := buildWorkerConfigMap(w, out)
	cm.ObjectMeta = metav1.ObjectMeta{
		Name: donsConfigMapName(d, out.Version), Namespace: d.Namespace, Labels: labels,
		Annotations: map[string]string{AnnotationVersion: out.Version}, OwnerReferences: own,
	}

	tmpl := buildWorkerDeployment(w, out, inputsHash, opts).Spec.Template
	for k := range tmpl.Labels {
		if k == LabelWorker || k == LabelComponent || k == LabelInstance {
			delete(tmpl.Labels, k)
		}
	}
	for k, v := range labels {
		tmpl.Labels[k] = v
	}
	pod := &tmpl.Spec
	// Volumes: the shard's ConfigMap; the sidecar's store lives on the PVC.
	vols := pod.Volumes[:0]
	for _, v := range pod.Volumes {
		switch v.Name {
		case "sidecar-data":
			continue
		case "config":
			v.ConfigMap.Name = cm.Name
		}
		vols = append(vols, v)
	}
	pod.Volumes = vols
	for i := range pod.InitContainers {
		c := &pod.InitContainers[i]
		if c.Name != sidecarContainer {
			continue
		}
		for j := range c.VolumeMounts {
			if c.VolumeMounts[j].Name == "sidecar-data" {
				c.VolumeMounts[j] = corev1.VolumeMount{Name: shardDataVolume, MountPath: SidecarDataDir, SubPath: shardSidecarSubDir}
			}
		}
		c.Args = append(c.Args, channelLimitArgs(d.Spec.Channels)...)
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if c.Name != workerdContainer {
			continue
		}
		c.Args = workerdconfig.ShardArgs(w)
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: workerdconfig.GatewaySocket, ContainerPort: workerdconfig.GatewayPort, Protocol: corev1.ProtocolTCP})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: shardDataVolume, MountPath: workerdconfig.DOStorageDir, SubPath: shardDOSubPath})
	}

	size := resource.MustParse(DefaultShardStorage)
	var class *string
	retain := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	whenDeleted := retain
	if s := d.Spec.Storage; s != nil {
		if s.Size != nil {
			size = s.Size.DeepCopy()
		}
		class = s.StorageClassName
		if s.ReclaimPolicy == fleetv1alpha1.ReclaimDelete {
			whenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		}
	}
	pvc := corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: shardDataVolume, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}

	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: d.Namespace, Labels: labels, OwnerReferences: own},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(workerdconfig.Shards(d)),
			ServiceName: set,
			Selector:    &metav1.LabelSelector{MatchLabels: donsSelector(d)},
			// Parallel: shards are independent owners, none waits for another to start.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// One pod at a time; a shard being replaced is not ready, so its objects are
			// refused (never served by a second copy) until it is back.
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			RevisionHistoryLimit: ptr.To[int32](3),
			Template:             tmpl,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{pvc},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: whenDeleted,
				WhenScaled:  retain,
			},
		},
	}

	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: d.Namespace, Labels: labels, OwnerReferences: own},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  donsSelector(d),
			// Only ready shards get DNS records: a shard that is not ready is refused.
			PublishNotReadyAddresses: false,
			Ports: []corev1.ServicePort{{
				Name: workerdconfig.GatewaySocket, Port: workerdconfig.GatewayPort,
				TargetPort: intstr.FromString(workerdconfig.GatewaySocket), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
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
func resolveDurableObjects(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, host *fleetv1alpha1.DurableObjectNamespace, opts Options) (map[string]workerdconfig.DurableObjectTarget, error) {
	out := map[string]workerdconfig.DurableObjectTarget{}
	ropts := workerdconfig.Options{ClusterDomain: opts.ClusterDomain}
	if host != nil {
		t, err := workerdconfig.TargetFor(host, ropts)
		if err != nil {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: err.Error()}
		}
		out[host.Name] = t
	}
	for i, b := range w.Spec.Bindings {
		ref := b.DurableObjectNamespace
		if ref == nil {
			continue
		}
		if _, done := out[ref.Name]; done {
			continue
		}
		d := &fleetv1alpha1.DurableObjectNamespace{}
		err := c.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: ref.Name}, d)
		if apierrors.IsNotFound(err) {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonReferenceNotFound,
				message: fmt.Sprintf("spec.bindings[%d] (%s): DurableObjectNamespace %q not found in namespace %q", i, b.Name, ref.Name, w.Namespace)}
		}
		if err != nil {
			return nil, err
		}
		t, err := workerdconfig.TargetFor(d, ropts)
		if err != nil {
			return nil, &errBlocked{reason: fleetv1alpha1.ReasonInvalidSpec, message: fmt.Sprintf("spec.bindings[%d] (%s): %v", i, b.Name, err)}
		}
		out[d.Name] = t
	}
	return out, nil
}
