package testenv

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// PolicyPod is a pod as NetworkPolicy sees it: its namespace, labels and IP, and its
// spec for the named ports of a destination.
type PolicyPod struct {
	Namespace string
	Labels    map[string]string
	IP        string
	Spec      *corev1.PodSpec
}

// NetworkPolicies evaluates networking.k8s.io/v1 NetworkPolicies (ingress: Allowed;
// egress: AllowedEgress),
// for tests on clusters where no implementation enforces them (the local cluster):
//   - a pod is isolated for ingress when a policy of its namespace selects it
//     (spec.podSelector; the empty selector selects every pod) and its policyTypes
//     include Ingress (an empty policyTypes does);
//   - a connection to an isolated pod is allowed when some ingress rule of some policy
//     selecting it admits both the source (from: empty admits any source) and the port
//     (ports: empty admits any port);
//   - a peer with only podSelector admits pods of the policy's namespace; with
//     namespaceSelector, pods of the namespaces it selects (all of them when podSelector
//     is unset, those it selects otherwise); ipBlock matches the source IP;
//   - a port is a number (with endPort, a range) or the name of a container port of the
//     destination pod, with the protocol (default TCP).
//
// Namespaces maps a namespace's name to its labels; kubernetes.io/metadata.name is
// added as the API server does.
type NetworkPolicies struct {
	Policies   []networkingv1.NetworkPolicy
	Namespaces map[string]map[string]string
}

// Allowed reports whether a TCP connection from from to port of to is allowed.
func (n NetworkPolicies) Allowed(from, to PolicyPod, port int32) (bool, error) {
	isolated := false
	for i := range n.Policies {
		p := &n.Policies[i]
		if p.Namespace != to.Namespace || !hasIngress(p) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			return false, err
		}
		if !sel.Matches(labels.Set(to.Labels)) {
			continue
		}
		isolated = true
		for _, rule := range p.Spec.Ingress {
			ok, err := n.ruleAdmits(p.Namespace, rule, from, to, port)
			if ok || err != nil {
				return ok, err
			}
		}
	}
	return !isolated, nil
}

// AllowedEgress reports whether the egress side of the policies lets from open a TCP
// connection to port of to (a pod, or an address outside the cluster: only IP set). The
// rules mirror the ingress ones: from is isolated for egress when a policy of its
// namespace selects it and lists Egress in policyTypes; then some egress rule must admit
// the destination (to: empty admits any) and the port.
func (n NetworkPolicies) AllowedEgress(from, to PolicyPod, port int32) (bool, error) {
	isolated := false
	for i := range n.Policies {
		p := &n.Policies[i]
		if p.Namespace != from.Namespace || !hasType(p, networkingv1.PolicyTypeEgress) {
			continue
		}
		if ok, err := selects(&p.Spec.PodSelector, from.Labels); !ok || err != nil {
			if err != nil {
				return false, err
			}
			continue
		}
		isolated = true
		for _, rule := range p.Spec.Egress {
			ok, err := n.ruleAdmits(p.Namespace, networkingv1.NetworkPolicyIngressRule{From: rule.To, Ports: rule.Ports}, to, to, port)
			if ok || err != nil {
				return ok, err
			}
		}
	}
	return !isolated, nil
}

func hasType(p *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	for _, pt := range p.Spec.PolicyTypes {
		if pt == t {
			return true
		}
	}
	return false
}

func hasIngress(p *networkingv1.NetworkPolicy) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return true
	}
	for _, t := range p.Spec.PolicyTypes {
		if t == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

func (n NetworkPolicies) ruleAdmits(ns string, rule networkingv1.NetworkPolicyIngressRule, from, to PolicyPod, port int32) (bool, error) {
	peerOK := len(rule.From) == 0
	for _, peer := range rule.From {
		ok, err := n.peerAdmits(ns, peer, from)
		if err != nil {
			return false, err
		}
		peerOK = peerOK || ok
	}
	if !peerOK {
		return false, nil
	}
	if len(rule.Ports) == 0 {
		return true, nil
	}
	for _, p := range rule.Ports {
		if portAdmits(p, to, port) {
			return true, nil
		}
	}
	return false, nil
}

func (n NetworkPolicies) peerAdmits(ns string, peer networkingv1.NetworkPolicyPeer, from PolicyPod) (bool, error) {
	if b := peer.IPBlock; b != nil {
		return ipInBlock(from.IP, b)
	}
	if peer.PodSelector == nil && peer.NamespaceSelector == nil {
		return false, fmt.Errorf("a NetworkPolicyPeer sets none of podSelector, namespaceSelector, ipBlock")
	}
	if peer.NamespaceSelector == nil {
		if from.Namespace != ns {
			return false, nil
		}
	} else {
		nsLabels := labels.Set{podcontract.LabelNamespaceName: from.Namespace}
		for k, v := range n.Namespaces[from.Namespace] {
			nsLabels[k] = v
		}
		if ok, err := selects(peer.NamespaceSelector, nsLabels); !ok || err != nil {
			return false, err
		}
	}
	if peer.PodSelector == nil {
		return true, nil
	}
	return selects(peer.PodSelector, from.Labels)
}

func selects(s *metav1.LabelSelector, l map[string]string) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(l)), nil
}

func ipInBlock(ip string, b *networkingv1.IPBlock) (bool, error) {
	addr := net.ParseIP(ip)
	_, cidr, err := net.ParseCIDR(b.CIDR)
	if err != nil || addr == nil || !cidr.Contains(addr) {
		return false, err
	}
	for _, e := range b.Except {
		_, ex, err := net.ParseCIDR(e)
		if err != nil {
			return false, err
		}
		if ex.Contains(addr) {
			return false, nil
		}
	}
	return true, nil
}

func portAdmits(p networkingv1.NetworkPolicyPort, to PolicyPod, port int32) bool {
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
		return false
	}
	switch {
	case p.Port == nil:
		return true
	case p.Port.Type == intstr.Int && p.EndPort != nil:
		return port >= p.Port.IntVal && port <= *p.EndPort
	case p.Port.Type == intstr.Int:
		return port == p.Port.IntVal
	}
	if to.Spec == nil {
		return false
	}
	for _, c := range append(append([]corev1.Container(nil), to.Spec.InitContainers...), to.Spec.Containers...) {
		for _, cp := range c.Ports {
			proto := cp.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			if cp.Name == p.Port.StrVal && proto == corev1.ProtocolTCP && cp.ContainerPort == port {
				return true
			}
		}
	}
	return false
}
