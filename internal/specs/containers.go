package specs

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Flags of the sidecar's container engine (cmd sidecar, internal/sidecar/containers).
const (
	ContainersSocketFlag    = "--containers-socket"
	ContainersAPIFlag       = "--containers-api"
	ContainersNamespaceFlag = "--containers-durable-object-namespace"
	ContainersImageFlag     = "--containers-image"
)

// applyContainerEngine wires spec.container of DurableObjectNamespace dons into a
// shard pod: a socket volume shared by workerd, which runs in it (the config names the
// socket relative to the working directory, render.ContainerEngine), and the sidecar,
// which serves Docker's API there and asks the manager's container API to run each
// instance as a Pod (docs/containers.md). A no-op without spec.container.
func applyContainerEngine(pod *corev1.PodSpec, dons string, c *fleetv1alpha1.ContainerSpec, opts Options) {
	if c == nil {
		return
	}
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: podcontract.ContainersVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	mount := corev1.VolumeMount{Name: podcontract.ContainersVolume, MountPath: podcontract.ContainersDir}
	for i := range pod.InitContainers {
		if s := &pod.InitContainers[i]; s.Name == podcontract.SidecarContainer {
			s.VolumeMounts = append(s.VolumeMounts, mount)
			s.Env = appendEnvOnce(s.Env, podNameEnv())
			s.Args = append(s.Args,
				ContainersSocketFlag+"="+podcontract.ContainersDir+"/"+podcontract.ContainersSocket,
				ContainersAPIFlag+"="+podcontract.ContainersAPIURL(opts.ManagerNamespace, opts.ClusterDomain),
				ContainersNamespaceFlag+"="+dons,
				ContainersImageFlag+"="+c.Image)
		}
	}
	for i := range pod.Containers {
		if w := &pod.Containers[i]; w.Name == podcontract.WorkerdContainer {
			w.VolumeMounts = append(w.VolumeMounts, mount)
			w.WorkingDir = podcontract.ConfigDir
		}
	}
}

// containerEgress lets a shard pod whose class runs containers reach its instances
// (any port: the class chooses) and the manager's container API.
func containerEgress(np *networkingv1.NetworkPolicy, dons string, c *fleetv1alpha1.ContainerSpec, opts Options) {
	if np == nil || c == nil {
		return
	}
	np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: ContainerInstanceSelector(dons)}}}})
	np.Spec.Egress = append(np.Spec.Egress, managerAPIEgress(opts)...)
}

// managerAPIEgress lets a pod's sidecar reach the manager's internal API (the
// container API, Shared user Workers' code); none when the manager's namespace is
// unknown.
func managerAPIEgress(opts Options) []networkingv1.NetworkPolicyEgressRule {
	mgr := managerPeer(opts)
	if mgr == nil {
		return nil
	}
	port := intstr.FromInt32(podcontract.ContainersAPIPort)
	return []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{*mgr},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}}}}
}

func appendEnvOnce(env []corev1.EnvVar, e corev1.EnvVar) []corev1.EnvVar {
	for _, x := range env {
		if x.Name == e.Name {
			return env
		}
	}
	return append(env, e)
}
