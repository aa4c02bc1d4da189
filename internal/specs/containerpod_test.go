package specs

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

func containerDONS(ns, name, instanceType string) *fleetv1alpha1.DurableObjectNamespace {
	return &fleetv1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "dons-uid"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{Container: &fleetv1alpha1.ContainerSpec{
			Image: "registry.example/app:1", InstanceType: instanceType}},
	}
}

// TestBuildContainerPod: an instance pod runs the namespace's image with the request's
// args (not command) and env, its instance type's CPU and memory (Cloudflare's table),
// Pod Security "restricted", no service account token and no service links, Never
// restarts, a 10 s grace period, and is owned (not controlled) by the shard pod.
func TestBuildContainerPod(t *testing.T) {
	shard := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rooms-shards-0", UID: "shard-uid"}}
	longName := "workerd-" + strings.Repeat("s", 40) + "-uniq-" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		instanceType  string
		internet      bool
		cpu, memory   string
		runtimeClass  string
		wantHostUsers *bool
	}{
		{"lite", false, "62m", "256Mi", "", nil},
		{"standard-2", true, "1", "6Gi", "gvisor", ptr.To(false)},
	} {
		t.Run(c.instanceType, func(t *testing.T) {
			opts := DefaultOptions()
			opts.RuntimeClassName, opts.HostUsers = c.runtimeClass, c.wantHostUsers == nil
			d := containerDONS("ns", "rooms", c.instanceType)
			pod := BuildContainerPod(ContainerInstance{DONS: d, ShardPod: shard, Name: longName,
				Args: []string{"--port", "8080"}, Env: []string{"A=1", "B=x=y", "EMPTY="}, Internet: c.internet}, opts)

			if pod.Name != ContainerPodName("ns", shard.Name, longName) || len(pod.Name) != len(ContainerPodPrefix)+20 {
				t.Errorf("name %q", pod.Name)
			}
			if errs := validation.IsDNS1123Label(pod.Name); len(errs) > 0 {
				t.Errorf("name %q: %v", pod.Name, errs)
			}
			if pod.Namespace != "ns" || pod.Annotations[podcontract.AnnotationContainerName] != longName {
				t.Errorf("namespace %q, annotations %v", pod.Namespace, pod.Annotations)
			}
			wantLabels := map[string]string{
				podcontract.LabelName: podcontract.ContainerAppName, podcontract.LabelManagedBy: podcontract.ManagedBy,
				podcontract.LabelComponent: podcontract.ComponentContainer, podcontract.LabelAppComponent: podcontract.ComponentContainer,
				podcontract.LabelDONS: "rooms", podcontract.LabelShardPod: shard.Name,
				podcontract.LabelInternet: map[bool]string{true: "true", false: "false"}[c.internet],
			}
			if !reflect.DeepEqual(pod.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", pod.Labels, wantLabels)
			}
			wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: shard.Name, UID: "shard-uid",
				Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)}}
			if !reflect.DeepEqual(pod.OwnerReferences, wantOwner) {
				t.Errorf("owner %+v", pod.OwnerReferences)
			}
			checkContainerPodSpec(t, &pod.Spec, c.cpu, c.memory)
			if want := d.Spec.Container.Resources(); !reflect.DeepEqual(pod.Spec.Containers[0].Resources, want) {
				t.Errorf("resources %v, want spec.container.Resources() %v", pod.Spec.Containers[0].Resources, want)
			}
			if got := ptr.Deref(pod.Spec.RuntimeClassName, ""); got != c.runtimeClass {
				t.Errorf("runtimeClassName %q, want %q", got, c.runtimeClass)
			}
			if !reflect.DeepEqual(pod.Spec.HostUsers, c.wantHostUsers) {
				t.Errorf("hostUsers %v, want %v", pod.Spec.HostUsers, c.wantHostUsers)
			}
		})
	}
}

func checkContainerPodSpec(t *testing.T, spec *corev1.PodSpec, cpu, memory string) {
	t.Helper()
	if spec.RestartPolicy != corev1.RestartPolicyNever || ptr.Deref(spec.TerminationGracePeriodSeconds, 0) != 10 ||
		ptr.Deref(spec.AutomountServiceAccountToken, true) || ptr.Deref(spec.EnableServiceLinks, true) {
		t.Errorf("pod spec: restartPolicy %s, grace %v, automount %v, serviceLinks %v", spec.RestartPolicy,
			spec.TerminationGracePeriodSeconds, spec.AutomountServiceAccountToken, spec.EnableServiceLinks)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC || len(spec.Volumes) > 0 || len(spec.InitContainers) > 0 {
		t.Errorf("pod spec shares the host or mounts volumes: %+v", spec)
	}
	psc := spec.SecurityContext
	if psc == nil || !ptr.Deref(psc.RunAsNonRoot, false) || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", psc)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Name != podcontract.ContainerInstanceContainer || c.Image != "registry.example/app:1" || len(c.Command) > 0 ||
		!reflect.DeepEqual(c.Args, []string{"--port", "8080"}) {
		t.Errorf("container %s image %s command %v args %v", c.Name, c.Image, c.Command, c.Args)
	}
	wantEnv := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "x=y"}, {Name: "EMPTY"}}
	if !reflect.DeepEqual(c.Env, wantEnv) {
		t.Errorf("env %v, want %v", c.Env, wantEnv)
	}
	sc := c.SecurityContext
	if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) != podcontract.RunAsUser ||
		ptr.Deref(sc.AllowPrivilegeEscalation, true) || ptr.Deref(sc.ReadOnlyRootFilesystem, true) ||
		sc.Privileged != nil || sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		len(sc.Capabilities.Add) > 0 || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v", sc)
	}
	// Limits are the instance type's (Cloudflare's table); requests what
	// ContainerSpec.Resources asks for below them.
	if l := c.Resources.Limits; !l.Cpu().Equal(resource.MustParse(cpu)) || !l.Memory().Equal(resource.MustParse(memory)) {
		t.Errorf("limits %v, want cpu %s memory %s", l, cpu, memory)
	}
	if r := c.Resources.Requests; r.Cpu().Cmp(*c.Resources.Limits.Cpu()) > 0 || r.Memory().Cmp(*c.Resources.Limits.Memory()) > 0 || r.Cpu().IsZero() || r.Memory().IsZero() {
		t.Errorf("requests %v: not within the limits %v", r, c.Resources.Limits)
	}
}

// TestContainerPodNameDeterministic: the same instance gets the same name; another
// namespace, shard or Docker name another one.
func TestContainerPodNameDeterministic(t *testing.T) {
	a := ContainerPodName("ns", "s-0", "workerd-x")
	for _, other := range []string{ContainerPodName("ns2", "s-0", "workerd-x"), ContainerPodName("ns", "s-1", "workerd-x"),
		ContainerPodName("ns", "s-0", "workerd-y"), ContainerPodName("ns/s", "0", "workerd-x")} {
		if other == a {
			t.Errorf("%s collides", other)
		}
	}
	if ContainerPodName("ns", "s-0", "workerd-x") != a {
		t.Error("not deterministic")
	}
}

// TestContainerNetworkPolicies evaluates the instance policies with the shard set's: only
// the namespace's shard pods of that DurableObjectNamespace reach an instance (any port);
// an instance without internet reaches nothing, not even DNS; with internet it reaches
// DNS and public addresses but no private, link-local, CGNAT or loopback one; and an
// instance is no workerd pod, so the shard's gateway does not admit it.
func TestContainerNetworkPolicies(t *testing.T) {
	policies, pods := fleetPolicies(t, npNamespace, managerOptions())
	d := containerDONS(npNamespace, "rooms", "")
	cps := BuildContainerNetworkPolicies(d, managerOptions())
	for _, p := range cps {
		if p.Namespace != npNamespace || !metav1.IsControlledBy(p, d) {
			t.Errorf("policy %s/%s not controlled by the DurableObjectNamespace", p.Namespace, p.Name)
		}
		policies = append(policies, *p)
	}
	np := testenv.NetworkPolicies{Policies: policies}
	inst := func(dons string, internet bool, ip string) testenv.PolicyPod {
		return testenv.PolicyPod{Namespace: npNamespace, Labels: ContainerInstanceLabels(dons, "rooms-shards-0", internet), IP: ip}
	}
	closed, open, otherDONS := inst("rooms", false, "10.0.1.1"), inst("rooms", true, "10.0.1.2"), inst("chat", false, "10.0.1.3")
	ext := func(ip string) testenv.PolicyPod { return testenv.PolicyPod{IP: ip} }
	for _, c := range []struct {
		what     string
		egress   bool
		from, to testenv.PolicyPod
		port     int32
		want     bool
	}{
		{"shard -> its instance, any port", false, pods["shard"], closed, 8080, true},
		{"shard -> its instance, another port", false, pods["shard"], open, 3000, true},
		{"worker -> instance", false, pods["worker"], closed, 8080, false},
		{"engine -> instance", false, pods["engine"], open, 8080, false},
		{"instance -> instance", false, open, closed, 8080, false},
		{"instance -> shard gateway", false, closed, pods["shard"], podcontract.GatewayPort, false},
		{"no internet: public", true, closed, ext("203.0.113.7"), 443, false},
		{"no internet: DNS", true, closed, ext("10.96.0.10"), 53, false},
		{"no internet: shard", true, closed, pods["shard"], podcontract.GatewayPort, false},
		{"internet: public", true, open, ext("203.0.113.7"), 443, true},
		{"internet: DNS", true, open, ext("10.96.0.10"), 53, true},
		{"internet: RFC 1918", true, open, ext("192.168.1.1"), 80, false},
		{"internet: pod network", true, open, pods["shard"], podcontract.GatewayPort, false},
		{"internet: cloud metadata", true, open, ext("169.254.169.254"), 80, false},
		{"internet: CGNAT", true, open, ext("100.64.0.1"), 80, false},
		{"other DONS's instance is not selected by these", true, otherDONS, ext("203.0.113.7"), 443, true},
	} {
		allowed := np.Allowed
		if c.egress {
			allowed = np.AllowedEgress
		}
		if got, err := allowed(c.from, c.to, c.port); err != nil || got != c.want {
			t.Errorf("%s: allowed %v, %v; want %v", c.what, got, err, c.want)
		}
	}
	if _, err := np.AllowedEgress(pods["shard"], closed, 8080); err != nil {
		t.Fatal(err)
	}
	// The shard pods' own policy (containerEgress) lets them reach their instances.
	shardNP := BuildDONSChildren(d, fixtureWorker(), &render.Output{Version: "v"}, "inputs", DefaultOptions()).NetworkPolicy
	withRule := testenv.NetworkPolicies{Policies: []networkingv1.NetworkPolicy{*shardNP}}
	if ok, err := withRule.AllowedEgress(pods["shard"], closed, 8080); !ok || err != nil {
		t.Errorf("the shard pods' NetworkPolicy does not let them reach their instance: %v %v", ok, err)
	}
}

// TestContainerInternetFollowsAdminOutbound: an instance's internet is the public part
// of the admin's default allow list minus the admin's deny list; an allow list with no
// public address leaves DNS only.
func TestContainerInternetFollowsAdminOutbound(t *testing.T) {
	d := containerDONS(npNamespace, "rooms", "")
	open := testenv.PolicyPod{Namespace: npNamespace, Labels: ContainerInstanceLabels("rooms", "rooms-shards-0", true), IP: "10.0.1.2"}
	ext := func(ip string) testenv.PolicyPod { return testenv.PolicyPod{IP: ip} }
	for _, c := range []struct {
		what      string
		allow     []string
		deny      []string
		ip        string
		port      int32
		wantReach bool
	}{
		{"denied public range", []string{"public"}, []string{"203.0.113.0/24"}, "203.0.113.7", 443, false},
		{"public outside the deny", []string{"public"}, []string{"203.0.113.0/24"}, "198.51.100.1", 443, true},
		{"no public in the allow list", []string{"10.96.0.0/12"}, nil, "198.51.100.1", 443, false},
		{"no public: the allowed private range is not internet", []string{"10.96.0.0/12"}, nil, "10.96.0.1", 443, false},
		{"no public: DNS still", []string{"10.96.0.0/12"}, nil, "10.96.0.10", 53, true},
		{"a public CIDR of the allow list", []string{"198.51.100.0/24"}, nil, "198.51.100.1", 443, true},
		{"a public CIDR of the allow list: elsewhere", []string{"198.51.100.0/24"}, nil, "203.0.113.7", 443, false},
		{"no allow list: public", nil, nil, "203.0.113.7", 443, true},
	} {
		opts := DefaultOptions()
		opts.Outbound.Allow, opts.Outbound.Deny = c.allow, c.deny
		var policies []networkingv1.NetworkPolicy
		for _, p := range BuildContainerNetworkPolicies(d, opts) {
			policies = append(policies, *p)
		}
		np := testenv.NetworkPolicies{Policies: policies}
		if got, err := np.AllowedEgress(open, ext(c.ip), c.port); err != nil || got != c.wantReach {
			t.Errorf("%s: allow %v deny %v -> %s:%d: %v, %v; want %v", c.what, c.allow, c.deny, c.ip, c.port, got, err, c.wantReach)
		}
	}
}
