package specs

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

const (
	npNamespace      = "ns" // fixtureWorker's
	npOtherNamespace = "other"
	npManagerNS      = "workerd-operator-system"
	npHTTPPort       = 8081
)

// fleetPolicies builds a Worker (http port npHTTPPort), a DurableObjectNamespace and a
// Workflow of it in namespace ns, and returns their NetworkPolicies and their pods.
func fleetPolicies(t *testing.T, ns string, opts Options) ([]networkingv1.NetworkPolicy, map[string]testenv.PolicyPod) {
	t.Helper()
	w := fixtureWorker(func(w *fleetv1alpha1.Worker) {
		w.Namespace = ns
		w.Spec.Service = &fleetv1alpha1.WorkerServiceSpec{Port: ptr.To[int32](npHTTPPort)}
	})
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	wc := BuildWorkerChildren(w, out, "inputs", opts)
	d := &fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rooms", UID: "uid-2"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: w.Name}}}
	ds := BuildDONSChildren(d, w, out, "inputs", opts)
	wf := &fleetv1alpha1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders", UID: "uid-3"},
		Spec: fleetv1alpha1.WorkflowSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: w.Name}}}
	es, err := BuildWorkflowChildren(wf, w, out, api.FileConfig{}, "inputs", opts)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(tmpl corev1.PodTemplateSpec, ip string) testenv.PolicyPod {
		return testenv.PolicyPod{Namespace: ns, Labels: tmpl.Labels, IP: ip, Spec: &tmpl.Spec}
	}
	return []networkingv1.NetworkPolicy{*wc.NetworkPolicy, *ds.NetworkPolicy, *es.NetworkPolicy}, map[string]testenv.PolicyPod{
		"worker": pod(wc.Deployment.Spec.Template, "10.0.0.1"),
		"shard":  pod(ds.StatefulSet.Spec.Template, "10.0.0.2"),
		"engine": pod(es.StatefulSet.Spec.Template, "10.0.0.3"),
	}
}

func managerOptions() Options {
	opts := DefaultOptions()
	opts.ManagerNamespace = npManagerNS
	return opts
}

// TestNetworkPolicyAdmitsWorkflowCreate: with the policies the operator builds, a
// Worker pod's and a shard pod's env.WF.create() reach the engine's sidecar (9092),
// and a workerd pod of another namespace does not.
func TestNetworkPolicyAdmitsWorkflowCreate(t *testing.T) {
	policies, pods := fleetPolicies(t, npNamespace, managerOptions())
	_, others := fleetPolicies(t, npOtherNamespace, managerOptions())
	np := testenv.NetworkPolicies{Policies: policies}
	for _, c := range []struct {
		caller string
		from   testenv.PolicyPod
		want   bool
	}{
		{"a Worker pod", pods["worker"], true},
		{"a shard pod", pods["shard"], true},
		{"a Worker pod of another namespace", others["worker"], false},
	} {
		got, err := np.Allowed(c.from, pods["engine"], podcontract.SidecarPort)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s → engine :%d allowed %v, want %v", c.caller, podcontract.SidecarPort, got, c.want)
		}
	}
}

// TestNetworkPolicyMatrix: every port of a Worker pod, a shard pod and an engine pod,
// from every kind of caller. http and health admit anyone; rpc and gateway the workerd
// pods of the namespace; trigger the manager; the sidecar both; nothing else is open.
func TestNetworkPolicyMatrix(t *testing.T) {
	policies, pods := fleetPolicies(t, npNamespace, managerOptions())
	_, others := fleetPolicies(t, npOtherNamespace, managerOptions())
	callers := map[string]testenv.PolicyPod{
		"worker": pods["worker"], "shard": pods["shard"], "engine": pods["engine"],
		"other-ns worker":          others["worker"],
		"manager":                  {Namespace: npManagerNS, Labels: podcontract.ManagerPodLabels(), IP: "10.0.9.1"},
		"manager labels elsewhere": {Namespace: npOtherNamespace, Labels: podcontract.ManagerPodLabels(), IP: "10.0.9.2"},
		"plain pod, same ns":       {Namespace: npNamespace, Labels: map[string]string{"app": "curl"}, IP: "10.0.9.3"},
	}
	inNS := map[string]bool{"worker": true, "shard": true, "engine": true}
	want := func(caller, target string, port int32) bool {
		switch port {
		case npHTTPPort, podcontract.HealthPort:
			return true
		case podcontract.RPCPort:
			return inNS[caller]
		case podcontract.GatewayPort:
			return inNS[caller] && target == "shard"
		case podcontract.TriggerPort:
			return caller == "manager"
		case podcontract.SidecarPort:
			return inNS[caller] || caller == "manager"
		}
		return false
	}
	np := testenv.NetworkPolicies{Policies: policies}
	for _, target := range []string{"worker", "shard", "engine"} {
		for caller, from := range callers {
			for _, port := range []int32{npHTTPPort, podcontract.DefaultHTTPPort, podcontract.HealthPort, podcontract.TriggerPort,
				podcontract.SidecarPort, podcontract.GatewayPort, podcontract.RunnerPort, podcontract.RPCPort} {
				got, err := np.Allowed(from, pods[target], port)
				if err != nil {
					t.Fatal(err)
				}
				if got != want(caller, target, port) {
					t.Errorf("%s → %s :%d allowed %v, want %v", caller, target, port, got, !got)
				}
			}
		}
	}
}

// TestNetworkPolicyWithoutManagerNamespace: with no manager namespace, no pod is
// admitted as the manager; the rest is unchanged.
func TestNetworkPolicyWithoutManagerNamespace(t *testing.T) {
	policies, pods := fleetPolicies(t, npNamespace, DefaultOptions())
	np := testenv.NetworkPolicies{Policies: policies}
	mgr := testenv.PolicyPod{Namespace: npManagerNS, Labels: podcontract.ManagerPodLabels()}
	for _, c := range []struct {
		from testenv.PolicyPod
		port int32
		want bool
	}{
		{mgr, podcontract.TriggerPort, false},
		{mgr, podcontract.SidecarPort, false},
		{pods["worker"], podcontract.SidecarPort, true},
	} {
		if got, err := np.Allowed(c.from, pods["engine"], c.port); err != nil || got != c.want {
			t.Errorf("%s → engine :%d allowed %v (%v), want %v", c.from.Namespace, c.port, got, err, c.want)
		}
	}
}

// TestNetworkPolicyMetricsNamespace: with a scraper namespace, its pods reach the sidecar
// port of every workerd pod (for /metrics) and no other internal port.
func TestNetworkPolicyMetricsNamespace(t *testing.T) {
	opts := managerOptions()
	opts.MetricsNamespace = "monitoring"
	policies, pods := fleetPolicies(t, npNamespace, opts)
	np := testenv.NetworkPolicies{Policies: policies}
	prom := testenv.PolicyPod{Namespace: "monitoring", Labels: map[string]string{"app": "prometheus"}, IP: "10.0.8.1"}
	elsewhere := testenv.PolicyPod{Namespace: npOtherNamespace, Labels: map[string]string{"app": "prometheus"}, IP: "10.0.8.2"}
	for _, target := range []string{"worker", "shard", "engine"} {
		for _, port := range []int32{podcontract.SidecarPort, podcontract.RPCPort, podcontract.TriggerPort, podcontract.GatewayPort} {
			for _, from := range []testenv.PolicyPod{prom, elsewhere} {
				want := port == podcontract.SidecarPort && from.Namespace == "monitoring"
				if got, err := np.Allowed(from, pods[target], port); err != nil || got != want {
					t.Errorf("%s → %s :%d allowed %v (%v), want %v", from.Namespace, target, port, got, err, want)
				}
			}
		}
	}
}

// TestNetworkPolicyCoversEveryPort: every container port of the pods says who it
// admits (portPeersByName), so a port added to the pod contract is not silently closed.
func TestNetworkPolicyCoversEveryPort(t *testing.T) {
	_, pods := fleetPolicies(t, npNamespace, managerOptions())
	for name, p := range pods {
		for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, cp := range c.Ports {
				if _, ok := portPeersByName[cp.Name]; !ok {
					t.Errorf("%s pod: container %s port %s (%d) is not in portPeersByName", name, c.Name, cp.Name, cp.ContainerPort)
				}
			}
		}
		if got := fmt.Sprint(p.Labels[podcontract.LabelManagedBy]); got != podcontract.ManagedBy {
			t.Errorf("%s pod labels %v lack %s", name, p.Labels, podcontract.LabelManagedBy)
		}
	}
}

// TestNetworkPolicyEgressFollowsOutbound: the pods' egress is what workerd's network
// service allows the Worker (spec.outbound over the operator's default), plus DNS and
// the namespace's workerd pods, on the Worker's, the shards' and the engine's policies.
func TestNetworkPolicyEgressFollowsOutbound(t *testing.T) {
	opts := managerOptions()
	opts.Outbound = outbound.Rules{Allow: []string{"10.96.0.0/12", "10.244.0.0/16"}, Deny: []string{"10.96.0.10/32"}}
	cases := []struct {
		name string
		spec *fleetv1alpha1.OutboundSpec
		want []networkingv1.IPBlock
	}{
		{"default", nil, []networkingv1.IPBlock{{CIDR: "10.96.0.0/12", Except: []string{"10.96.0.10/32"}}, {CIDR: "10.244.0.0/16"}}},
		{"author's allow and deny", &fleetv1alpha1.OutboundSpec{Allow: []string{"10.96.0.0/16", "192.0.2.7"}, Deny: []string{"10.96.1.0/24"}},
			[]networkingv1.IPBlock{{CIDR: "10.96.0.0/16", Except: []string{"10.96.1.0/24", "10.96.0.10/32"}}, {CIDR: "192.0.2.7/32"}}},
		{"loopback only", &fleetv1alpha1.OutboundSpec{Allow: []string{"local"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := fixtureWorker(func(w *fleetv1alpha1.Worker) { w.Spec.Outbound = c.spec })
			out, err := render.Render(render.Input{Worker: w})
			if err != nil {
				t.Fatal(err)
			}
			np := BuildWorkerChildren(w, out, "inputs", opts).NetworkPolicy
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				t.Fatalf("policyTypes %v: egress not restricted", np.Spec.PolicyTypes)
			}
			var blocks []networkingv1.IPBlock
			dns, pods := false, false
			for _, r := range np.Spec.Egress {
				for _, p := range r.To {
					switch {
					case p.IPBlock != nil:
						blocks = append(blocks, *p.IPBlock)
					case p.PodSelector != nil && p.NamespaceSelector == nil:
						pods = reflect.DeepEqual(p.PodSelector.MatchLabels, WorkerdPodLabels())
					}
				}
				if len(r.To) == 0 && len(r.Ports) == 2 && r.Ports[0].Port.IntValue() == 53 {
					dns = true
				}
			}
			if !reflect.DeepEqual(blocks, c.want) || !dns || !pods {
				t.Errorf("egress %+v: ipBlocks %+v (want %+v), DNS %v, workerd pods %v", np.Spec.Egress, blocks, c.want, dns, pods)
			}
		})
	}
}

// TestNetworkPolicyEgressEvaluated evaluates the egress side of the policies the
// operator builds (testenv.NetworkPolicies.AllowedEgress) under the default public,
// 10.96.0.0/12 and the admin's deny 10.96.0.10/32.
func TestNetworkPolicyEgressEvaluated(t *testing.T) {
	opts := managerOptions()
	opts.Outbound = outbound.Rules{Allow: []string{"public", "10.96.0.0/12"}, Deny: []string{"10.96.0.10/32"}}
	policies, pods := fleetPolicies(t, npNamespace, opts)
	np := testenv.NetworkPolicies{Policies: policies}
	ext := func(ip string) testenv.PolicyPod { return testenv.PolicyPod{IP: ip} }
	for _, c := range []struct {
		what     string
		from, to testenv.PolicyPod
		port     int32
		want     bool
	}{
		{"a public address", pods["worker"], ext("203.0.113.7"), 443, true},
		{"a Service CIDR address", pods["worker"], ext("10.96.5.5"), 80, true},
		{"the denied address", pods["worker"], ext("10.96.0.10"), 80, false},
		{"DNS, wherever it is", pods["worker"], ext("10.96.0.10"), 53, true},
		{"cloud metadata (link-local, not public)", pods["worker"], ext("169.254.169.254"), 80, false},
		{"a private network outside the allow list", pods["worker"], ext("192.168.1.1"), 5432, false},
		{"a shard pod of the namespace (DO gateway)", pods["worker"], pods["shard"], podcontract.GatewayPort, true},
		{"the engine's sidecar, from a shard", pods["shard"], pods["engine"], podcontract.SidecarPort, true},
		{"a Service CIDR address, from the engine", pods["engine"], ext("10.96.5.5"), 80, true},
	} {
		got, err := np.AllowedEgress(c.from, c.to, c.port)
		if err != nil || got != c.want {
			t.Errorf("%s (%s:%d): allowed %v, %v; want %v", c.what, c.to.IP, c.port, got, err, c.want)
		}
	}
}
