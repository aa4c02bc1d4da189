package specs

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Who a port of a workerd pod admits (docs/security-internal-plane.md "NetworkPolicies").
type portPeers int

const (
	// peersAnyone: the http port (clients) and health (kubelet probes).
	peersAnyone portPeers = iota
	// peersNamespace: the operator's workerd pods of the pod's own namespace.
	peersNamespace
	// peersManager: the manager pods.
	peersManager
	// peersNamespaceAndManager: both.
	peersNamespaceAndManager
	// peersDispatchers: the workerd pods of Workers that bind the pod's dispatch
	// namespace (the rpc and http ports of a user Worker: it is reached only by dispatch).
	peersDispatchers
)

// portPeersByName says who each named container port of a workerd pod admits. A port
// missing here gets no rule, so it admits nobody (TestNetworkPolicyCoversEveryPort).
var portPeersByName = map[string]portPeers{
	podcontract.HTTPPortName:    peersAnyone,
	podcontract.HealthPortName:  peersAnyone,
	podcontract.RPCPortName:     peersNamespace,
	podcontract.GatewayPortName: peersNamespace,
	podcontract.TriggerPortName: peersManager,
	// Workers and shards create Workflow instances on the engine's sidecar; the manager
	// reads instance counts and starts cron targets there.
	podcontract.SidecarPortName: peersNamespaceAndManager,
}

// WorkerdPodLabels are the labels every workerd pod the operator runs carries.
func WorkerdPodLabels() map[string]string {
	return map[string]string{podcontract.LabelName: podcontract.AppName, podcontract.LabelManagedBy: podcontract.ManagedBy}
}

// DispatcherLabels select the workerd pods of the Workers that bind dispatch namespace
// dns.
func DispatcherLabels(dns string) map[string]string {
	l := WorkerdPodLabels()
	l[podcontract.LabelDispatcherPrefix+dns] = "true"
	return l
}

// dispatchPodLabels are the labels of w's pods that place it in Workers for Platforms:
// its own dispatch namespace, and one per dispatch namespace its bindings reach.
func dispatchPodLabels(w *fleetv1alpha1.Worker) map[string]string {
	l := map[string]string{}
	if w.Spec.DispatchNamespace != "" {
		l[podcontract.LabelDispatchNamespace] = w.Spec.DispatchNamespace
	}
	for _, dns := range render.DispatchedNamespaces(w) {
		l[podcontract.LabelDispatcherPrefix+dns] = "true"
	}
	return l
}

// buildNetworkPolicy is the ingress policy of the pods selected by selector, whose spec
// is pod: each container port admits the peers portPeersByName names. The http port is
// named (it follows spec.service.port, and pods of an older ReplicaSet may still listen
// on the previous one); the pod contract's fixed ports are numbers. Egress follows the
// Worker's outbound rules (egressRules).
func buildNetworkPolicy(meta metav1.ObjectMeta, selector map[string]string, pod *corev1.PodSpec, opts Options, w *fleetv1alpha1.Worker) *networkingv1.NetworkPolicy {
	ports := map[portPeers][]networkingv1.NetworkPolicyPort{}
	var sidecar []networkingv1.NetworkPolicyPort // the metrics scraper's port
	for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
		for _, p := range c.Ports {
			peers, ok := portPeersByName[p.Name]
			if !ok {
				continue
			}
			if (p.Name == podcontract.RPCPortName || p.Name == podcontract.HTTPPortName) && w != nil && w.Spec.DispatchNamespace != "" {
				peers = peersDispatchers
			}
			port := intstr.FromInt32(p.ContainerPort)
			if p.Name == podcontract.HTTPPortName {
				port = intstr.FromString(p.Name)
			}
			np := networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}
			ports[peers] = append(ports[peers], np)
			if p.Name == podcontract.SidecarPortName {
				sidecar = append(sidecar, np)
			}
		}
	}
	namespace := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: WorkerdPodLabels()}}
	var rules []networkingv1.NetworkPolicyIngressRule
	add := func(from []networkingv1.NetworkPolicyPeer, ps ...[]networkingv1.NetworkPolicyPort) {
		var all []networkingv1.NetworkPolicyPort
		for _, p := range ps {
			all = append(all, p...)
		}
		if len(all) > 0 {
			rules = append(rules, networkingv1.NetworkPolicyIngressRule{From: from, Ports: all})
		}
	}
	add(nil, ports[peersAnyone])
	add([]networkingv1.NetworkPolicyPeer{namespace}, ports[peersNamespace], ports[peersNamespaceAndManager])
	if w != nil && w.Spec.DispatchNamespace != "" {
		add([]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: DispatcherLabels(w.Spec.DispatchNamespace)}}}, ports[peersDispatchers])
	}
	if m := managerPeer(opts); m != nil {
		add([]networkingv1.NetworkPolicyPeer{*m}, ports[peersManager], ports[peersNamespaceAndManager])
	}
	if opts.MetricsNamespace != "" {
		add([]networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{podcontract.LabelNamespaceName: opts.MetricsNamespace}}}}, sidecar)
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: meta,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     rules,
			Egress:      egressRules(w, opts),
		},
	}
}

// egressRules let the pods reach what workerd's network service lets the Worker's code
// reach (spec.outbound and the operator's default, as ipBlocks), plus what every pod
// needs whatever spec.outbound says: cluster DNS (port 53 anywhere: the resolver's
// address differs per cluster) and the operator's workerd pods of the namespace
// (service bindings, Durable Object gateways, Workflow engines).
func egressRules(w *fleetv1alpha1.Worker, opts Options) []networkingv1.NetworkPolicyEgressRule {
	dns := intstr.FromInt32(53)
	rules := []networkingv1.NetworkPolicyEgressRule{
		{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: &dns}, {Protocol: ptr.To(corev1.ProtocolTCP), Port: &dns}}},
		{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: WorkerdPodLabels()}}}},
	}
	var to []networkingv1.NetworkPolicyPeer
	for _, b := range outbound.IPBlocks(WorkerOutbound(w, opts)) {
		to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: b.CIDR, Except: b.Except}})
	}
	if len(to) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: to})
	}
	if w != nil && len(render.DispatchedNamespaces(w)) > 0 {
		// Its sidecar reads Shared user Workers' code from the manager.
		rules = append(rules, managerAPIEgress(opts)...)
	}
	return rules
}

// WorkerOutbound is the allow and deny lists w's network service gets: spec.outbound
// over the operator's default (entries that do not parse are left out here; the
// renderer refuses them).
func WorkerOutbound(w *fleetv1alpha1.Worker, opts Options) outbound.Rules {
	var allow, deny []string
	if o := w.Spec.Outbound; o != nil {
		allow, deny = parsedOnly(o.Allow), parsedOnly(o.Deny)
	}
	r := outbound.Effective(allow, deny, opts.Outbound)
	if len(r.Allow) == 0 {
		r.Allow = []string{outbound.Public} // workerd's own default
	}
	if w.Spec.DispatchNamespace != "" {
		r = outbound.UserWorker(r, opts.Outbound)
	}
	return r
}

func parsedOnly(entries []string) []string {
	var out []string
	for _, e := range entries {
		if p, err := outbound.Parse(e); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// managerPeer selects the manager pods in the manager's namespace; nil when the
// namespace is unknown (then no pod is admitted as the manager).
func managerPeer(opts Options) *networkingv1.NetworkPolicyPeer {
	if opts.ManagerNamespace == "" {
		return nil
	}
	return &networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{podcontract.LabelNamespaceName: opts.ManagerNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: podcontract.ManagerPodLabels()},
	}
}
