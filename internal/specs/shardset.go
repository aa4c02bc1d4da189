package specs

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"slices"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// ShardSet are the objects a DurableObjectNamespace or a Workflow owns: the pods'
// rendered ConfigMap, a StatefulSet, its headless Service, the pods' NetworkPolicy
// (applied when Options.NetworkPolicies is on) and their PodDisruptionBudget.
type ShardSet struct {
	ConfigMap     *corev1.ConfigMap
	StatefulSet   *appsv1.StatefulSet
	Service       *corev1.Service
	NetworkPolicy *networkingv1.NetworkPolicy
	// PodDisruptionBudget lets a node drain evict one of the set's pods at a time.
	PodDisruptionBudget *policyv1.PodDisruptionBudget
}

// shardSetParams describe a StatefulSet of stateful pods running a Worker's code:
// Durable Object shards and Workflow engines.
type shardSetParams struct {
	// name is the StatefulSet's and the headless Service's name; pod i is "<name>-<i>".
	name, namespace  string
	labels, selector map[string]string
	owner            metav1.OwnerReference
	replicas         int32
	storage          *fleetv1alpha1.StorageSpec
	// port is the headless Service's one port.
	port corev1.ServicePort
	// workerdArgs replace the workerd container's args; workerdPorts and
	// workerdMounts are added to it.
	workerdArgs   []string
	workerdPorts  []corev1.ContainerPort
	workerdMounts []corev1.VolumeMount
	// preStop replaces the workerd container's preStop hook when set.
	preStop *corev1.LifecycleHandler
	// sidecarArgs are added to the sidecar's args; sidecarConfig mounts the rendered
	// ConfigMap into the sidecar too (read-only, at podcontract.ConfigDir).
	sidecarArgs   []string
	sidecarConfig bool
	// backup wires spec.backup and spec.restore into the pods.
	backup StoreBackup
	// container is a DurableObjectNamespace's spec.container (applyContainerEngine).
	container *fleetv1alpha1.ContainerSpec
	// containerOwner names the DurableObjectNamespace whose objects run them.
	containerOwner string
	// extraFiles are added to the rendered ConfigMap (files for the sidecar); they are
	// part of its content-addressed name.
	extraFiles []render.File
}

// buildShardSet builds the ConfigMap, StatefulSet, headless Service, NetworkPolicy and
// PodDisruptionBudget of p from the Worker pod template of w (same containers, security
// context, probes, scheduling fields; the pods spread over nodes unless the Worker sets
// its own spread): the Worker labels become p's, the sidecar's store moves from an
// emptyDir to the pod's PVC ("data", subPath "sidecar"), and p's additions are applied.
// Pure.
func buildShardSet(w *fleetv1alpha1.Worker, out *render.Output, inputsHash string, opts Options, p shardSetParams) ShardSet {
	own := []metav1.OwnerReference{p.owner}
	if len(p.extraFiles) > 0 {
		o := *out
		o.Files = append(append([]render.File(nil), out.Files...), p.extraFiles...)
		o.Version = render.ContentVersion(&o)
		out = &o
	}
	cm := buildWorkerConfigMap(w, out)
	cm.ObjectMeta = metav1.ObjectMeta{
		Name: p.name + "-" + shortHash(out.Version), Namespace: p.namespace, Labels: p.labels,
		Annotations: map[string]string{podcontract.AnnotationVersion: out.Version}, OwnerReferences: own,
	}
	pvc, whenDeleted := shardVolumeClaim(p)
	retain := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: p.labels, OwnerReferences: own},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(p.replicas),
			ServiceName: p.name,
			Selector:    &metav1.LabelSelector{MatchLabels: p.selector},
			// Parallel: shards are independent owners, none waits for another to start.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// One pod at a time; a shard being replaced is not ready, so its work is
			// refused (never served by a second copy) until it is back.
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			RevisionHistoryLimit: ptr.To[int32](3),
			Template:             shardPodTemplate(w, out, inputsHash, opts, p, cm.Name),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{pvc},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: whenDeleted,
				WhenScaled:  retain,
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: p.labels, OwnerReferences: own},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  p.selector,
			// Only ready pods get DNS records: a shard that is not ready is refused.
			PublishNotReadyAddresses: false,
			Ports:                    []corev1.ServicePort{p.port},
		},
	}
	np := buildNetworkPolicy(metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: p.labels, OwnerReferences: own},
		p.selector, &sts.Spec.Template.Spec, opts, w)
	p.backup.egress(np)
	containerEgress(np, p.containerOwner, p.container, opts)
	pdb := buildDisruptionBudget(metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: p.labels, OwnerReferences: own}, p.selector)
	return ShardSet{ConfigMap: cm, StatefulSet: sts, Service: svc, NetworkPolicy: np, PodDisruptionBudget: pdb}
}

// shardPodTemplate is the Worker pod template of w with p's labels, the config volume
// on configMap, the sidecar's store on the PVC and p's additions to both containers.
func shardPodTemplate(w *fleetv1alpha1.Worker, out *render.Output, inputsHash string, opts Options, p shardSetParams, configMap string) corev1.PodTemplateSpec {
	tmpl := workerPodTemplate(w, out, inputsHash, opts)
	for k := range tmpl.Labels {
		if k == podcontract.LabelWorker || k == podcontract.LabelComponent || k == podcontract.LabelInstance {
			delete(tmpl.Labels, k)
		}
	}
	for k, v := range p.labels {
		tmpl.Labels[k] = v
	}
	pod := &tmpl.Spec
	vols := pod.Volumes[:0]
	for _, v := range pod.Volumes {
		switch v.Name {
		case "sidecar-data":
			continue
		case "config":
			v.ConfigMap.Name = configMap
		}
		vols = append(vols, v)
	}
	pod.Volumes = vols
	// One owner per object: the successor starts once this pod is gone, so it does not
	// wait out the Worker's drain (ShardDrainSeconds).
	pod.TerminationGracePeriodSeconds = ptr.To(opts.PreStopSeconds + opts.ShardDrainSeconds)
	for i := range pod.InitContainers {
		if c := &pod.InitContainers[i]; c.Name == podcontract.SidecarContainer {
			shardSidecar(c, p)
		}
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if c.Name != podcontract.WorkerdContainer {
			continue
		}
		if p.workerdArgs != nil {
			c.Args = append(append([]string(nil), p.workerdArgs...), out.Args...)
		}
		c.Ports = append(c.Ports, p.workerdPorts...)
		c.VolumeMounts = append(c.VolumeMounts, p.workerdMounts...)
		if p.preStop != nil {
			c.Lifecycle = &corev1.Lifecycle{PreStop: p.preStop}
		}
	}
	p.backup.apply(pod, opts)
	applyContainerEngine(pod, p.containerOwner, p.container, opts)
	defaultSpread(pod, p.selector, statefulSetSpreadKeys)
	return tmpl
}

// shardSidecar moves the sidecar's store onto the PVC and applies p's sidecar additions.
func shardSidecar(c *corev1.Container, p shardSetParams) {
	for j := range c.VolumeMounts {
		if c.VolumeMounts[j].Name == "sidecar-data" {
			c.VolumeMounts[j] = corev1.VolumeMount{Name: shardDataVolume, MountPath: podcontract.SidecarDataDir, SubPath: shardSidecarSubDir}
		}
	}
	if p.sidecarConfig {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: podcontract.ConfigDir, ReadOnly: true})
	}
	c.Args = append(c.Args, p.sidecarArgs...)
	if slices.ContainsFunc(p.workerdPorts, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == podcontract.GatewayPort }) {
		c.Args = append(c.Args, frontArg(podcontract.GatewaySocket))
	}
}

// shardVolumeClaim is the claim template of every pod of p (spec.storage: size, class)
// and what happens to the claims when the set is deleted (spec.storage.reclaimPolicy).
func shardVolumeClaim(p shardSetParams) (corev1.PersistentVolumeClaim, appsv1.PersistentVolumeClaimRetentionPolicyType) {
	size := resource.MustParse(DefaultShardStorage)
	var class *string
	whenDeleted := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if s := p.storage; s != nil {
		if s.Size != nil {
			size = s.Size.DeepCopy()
		}
		class = s.StorageClassName
		if s.ReclaimPolicy == fleetv1alpha1.ReclaimDelete {
			whenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		}
	}
	return corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: shardDataVolume, Labels: p.labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, whenDeleted
}
