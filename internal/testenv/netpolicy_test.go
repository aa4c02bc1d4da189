package testenv

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// The evaluator on the cases of the NetworkPolicy documentation it relies on.
func TestNetworkPoliciesSemantics(t *testing.T) {
	const policies = `
- metadata: {namespace: a, name: web}
  spec:
    podSelector: {matchLabels: {app: web}}
    ingress:
      - from: [{podSelector: {matchLabels: {role: client}}}]
        ports: [{port: http}]
      - from: [{namespaceSelector: {matchLabels: {team: x}}, podSelector: {matchLabels: {role: client}}}]
        ports: [{port: 9000, endPort: 9010}]
      - from: [{namespaceSelector: {}}]
        ports: [{port: 7000, protocol: UDP}]
      - from: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}]
        ports: [{port: 6000}]
- metadata: {namespace: a, name: egress-only}
  spec:
    podSelector: {matchLabels: {app: db}}
    policyTypes: [Egress]
`
	var ps []networkingv1.NetworkPolicy
	if err := yaml.Unmarshal([]byte(policies), &ps); err != nil {
		t.Fatal(err)
	}
	n := NetworkPolicies{Policies: ps, Namespaces: map[string]map[string]string{"b": {"team": "x"}}}
	web := PolicyPod{Namespace: "a", Labels: map[string]string{"app": "web"}, Spec: &corev1.PodSpec{
		Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
	client := func(ns, ip string) PolicyPod {
		return PolicyPod{Namespace: ns, Labels: map[string]string{"role": "client"}, IP: ip}
	}
	for _, c := range []struct {
		what     string
		from, to PolicyPod
		port     int32
		want     bool
	}{
		{"named port, same namespace", client("a", ""), web, 8080, true},
		{"named port resolves to its number only", client("a", ""), web, 8081, false},
		{"podSelector alone: the policy's namespace only", client("b", ""), web, 8080, false},
		{"namespaceSelector and podSelector, in range", client("b", ""), web, 9005, true},
		{"namespace not selected", client("c", ""), web, 9005, false},
		{"out of range", client("b", ""), web, 9011, false},
		{"a TCP connection to a UDP-only port", client("c", ""), web, 7000, false},
		{"ipBlock", PolicyPod{Namespace: "c", IP: "10.2.0.1"}, web, 6000, true},
		{"ipBlock except", PolicyPod{Namespace: "c", IP: "10.1.0.1"}, web, 6000, false},
		{"a pod no policy selects", client("c", ""), PolicyPod{Namespace: "a", Labels: map[string]string{"app": "api"}}, 1, true},
		{"an Egress-only policy does not isolate for ingress", client("c", ""), PolicyPod{Namespace: "a", Labels: map[string]string{"app": "db"}}, 1, true},
	} {
		got, err := n.Allowed(c.from, c.to, c.port)
		if err != nil || got != c.want {
			t.Errorf("%s: allowed %v (%v), want %v", c.what, got, err, c.want)
		}
	}
}
