package specs

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// ContainerPodPrefix starts the name of every container instance pod.
const ContainerPodPrefix = "wdc-"

// ContainerStopSeconds is an instance pod's termination grace period: Docker's default
// StopTimeout, which workerd's stop() expects.
const ContainerStopSeconds = 10

// ContainerInstance is one container instance a shard pod's sidecar asked for.
type ContainerInstance struct {
	// DONS is the DurableObjectNamespace whose class runs the container; its
	// spec.container gives the image and resources.
	DONS *fleetv1alpha1.DurableObjectNamespace
	// ShardPod is the calling shard pod: the instance pod's owner.
	ShardPod *corev1.Pod
	// Name is the Docker name workerd chose.
	Name string
	// Args are Docker's Cmd; Env are "K=V" entries.
	Args, Env []string
	// Internet lets the instance reach the public internet.
	Internet bool
}

// ContainerPodName is the instance pod's name: a hash of the caller's namespace, shard
// pod and Docker name, so it is a DNS label whatever the Docker name is, and a second
// start of the same instance finds the same pod.
func ContainerPodName(ns, shardPod, name string) string {
	sum := sha256.Sum256([]byte(ns + "/" + shardPod + "/" + name))
	return ContainerPodPrefix + hex.EncodeToString(sum[:])[:20]
}

// ContainerInstanceSelector selects every instance pod of DurableObjectNamespace dons.
func ContainerInstanceSelector(dons string) map[string]string {
	return map[string]string{
		podcontract.LabelName:      podcontract.ContainerAppName,
		podcontract.LabelComponent: podcontract.ComponentContainer,
		podcontract.LabelDONS:      dons,
	}
}

// ContainerInstanceLabels are the labels of an instance pod of dons started by shardPod.
func ContainerInstanceLabels(dons, shardPod string, internet bool) map[string]string {
	l := ContainerInstanceSelector(dons)
	l[podcontract.LabelManagedBy] = podcontract.ManagedBy
	l[podcontract.LabelAppComponent] = podcontract.ComponentContainer
	l[podcontract.LabelShardPod] = shardPod
	l[podcontract.LabelInternet] = strconv.FormatBool(internet)
	return l
}

// BuildContainerPod is the Pod of one container instance: the DurableObjectNamespace's
// image with the instance's args and env, its instance type's resources, no service
// account token and Pod Security "restricted", owned by the shard pod so that the
// garbage collector removes it with the shard. Kubernetes cannot restart an instance
// the way the object expects (the object starts it again), so restartPolicy is Never.
// The pod honours the operator's isolation settings (runtimeClassName, hostUsers) as
// workerd pods do. Args and env values reach the process literally, as Docker passes
// them (escapeExpansion). Pure.
func BuildContainerPod(in ContainerInstance, opts Options) *corev1.Pod {
	d, shard := in.DONS, in.ShardPod
	spec := d.Spec.Container
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        ContainerPodName(d.Namespace, shard.Name, in.Name),
			Namespace:   d.Namespace,
			Labels:      ContainerInstanceLabels(d.Name, shard.Name, in.Internet),
			Annotations: map[string]string{podcontract.AnnotationContainerName: in.Name},
			// Not a controller: nothing reconciles the pod, the shard only owns its life.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: shard.Name, UID: shard.UID,
				Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false),
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  podcontract.ContainerInstanceContainer,
				Image: spec.Image,
				// Args, not Command: workerd sends the user's entrypoint as Docker's Cmd,
				// which runs under the image's ENTRYPOINT as args do.
				Args:                     literal(in.Args),
				Env:                      containerEnv(in.Env),
				Resources:                spec.Resources(),
				SecurityContext:          containerSecurityContext(),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](ContainerStopSeconds),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	opts.isolate(&pod.Spec)
	return pod
}

// containerSecurityContext is Pod Security "restricted" for an image the operator does
// not know. runAsUser is set because runAsNonRoot alone makes the kubelet refuse an image
// without a USER (a scratch image runs as root by default): every instance runs as
// podcontract.RunAsUser (distroless's nonroot), which also overrides an image's own USER.
// The root filesystem stays writable: user images write where they like, as on Docker.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](podcontract.RunAsUser),
		RunAsGroup:               ptr.To[int64](podcontract.RunAsUser),
		ReadOnlyRootFilesystem:   ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerEnv turns Docker's "K=V" entries into env vars; an entry without "=" sets K
// to "" (the server refuses those before building). Values are escaped as args are.
func containerEnv(env []string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		out = append(out, corev1.EnvVar{Name: k, Value: escapeExpansion(v)})
	}
	return out
}

// literal escapes each arg (escapeExpansion).
func literal(args []string) []string {
	var out []string
	for _, a := range args {
		out = append(out, escapeExpansion(a))
	}
	return out
}

// escapeExpansion makes s reach the process as Docker passes it: the kubelet expands
// $(NAME) in args and env values and reduces "$$" to "$" wherever it appears, so every
// "$" is doubled (which also turns "$(" into the documented escape "$$(").
func escapeExpansion(s string) string { return strings.ReplaceAll(s, "$", "$$") }

// ContainerNetworkPolicyName and ContainerInternetPolicyName name the two NetworkPolicies
// of DurableObjectNamespace dons's instances (BuildContainerNetworkPolicies).
func ContainerNetworkPolicyName(dons string) string  { return dons + "-containers" }
func ContainerInternetPolicyName(dons string) string { return dons + "-containers-internet" }

// BuildContainerNetworkPolicies are the NetworkPolicies of d's container instances. A
// policy cannot make its egress depend on the selected pod's own labels, so there are
// two, and NetworkPolicies add up: the first selects every instance of d, admits
// ingress only from d's shard pods (any port: the object reaches whatever ports its
// container listens on) and no egress; the second selects the instances labelled
// internet=true and admits DNS (port 53 anywhere, as egressRules gives workerd pods:
// the resolver's address differs per cluster) and the public addresses the admin's
// outbound rules allow (ContainerInternet). Both are controlled by d, so they go with
// it. Pure.
func BuildContainerNetworkPolicies(d *fleetv1alpha1.DurableObjectNamespace, opts Options) []*networkingv1.NetworkPolicy {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: d.Namespace, OwnerReferences: []metav1.OwnerReference{donsOwnerRef(d)},
			Labels: map[string]string{podcontract.LabelManagedBy: podcontract.ManagedBy, podcontract.LabelDONS: d.Name,
				podcontract.LabelComponent: podcontract.ComponentContainer}}
	}
	typ := metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
	isolated := &networkingv1.NetworkPolicy{TypeMeta: typ, ObjectMeta: meta(ContainerNetworkPolicyName(d.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: ContainerInstanceSelector(d.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: DONSSelector(d)}}}}},
		}}
	internet := ContainerInstanceSelector(d.Name)
	internet[podcontract.LabelInternet] = "true"
	dns := intstr.FromInt32(53)
	egress := []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{
		{Protocol: ptr.To(corev1.ProtocolUDP), Port: &dns}, {Protocol: ptr.To(corev1.ProtocolTCP), Port: &dns}}}}
	var to []networkingv1.NetworkPolicyPeer
	for _, b := range outbound.IPBlocks(ContainerInternet(opts)) {
		to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: b.CIDR, Except: b.Except}})
	}
	if len(to) > 0 {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{To: to})
	}
	open := &networkingv1.NetworkPolicy{TypeMeta: typ, ObjectMeta: meta(ContainerInternetPolicyName(d.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: internet},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      egress,
		}}
	return []*networkingv1.NetworkPolicy{isolated, open}
}

// ContainerInternet is what an instance started with internet may reach besides DNS:
// the public part of the admin's default allow list (public itself, or public CIDRs in
// it; no list means public, workerd's own default) minus the admin's deny list, which
// no Worker lifts either. An allow list without public addresses leaves nothing: such
// an instance starts and resolves names but reaches no address. Private entries (the
// cluster's Service and Pod ranges) are never included: "internet" is not the cluster.
func ContainerInternet(opts Options) outbound.Rules {
	admin := opts.Outbound.Allow
	if len(admin) == 0 {
		admin = []string{outbound.Public}
	}
	var allow []string
	for _, e := range admin {
		if outbound.Within(e, []string{outbound.Public}) {
			allow = append(allow, e)
		}
	}
	if len(allow) == 0 {
		return outbound.Rules{}
	}
	return outbound.Rules{Allow: allow, Deny: append([]string(nil), opts.Outbound.Deny...)}
}
