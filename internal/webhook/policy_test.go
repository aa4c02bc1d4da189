package webhook

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Namespaces of the policy cases: tenantNS has no profile label (the policy's
// MaxProfile, paid, applies), freeNS is labelled free.
const (
	tenantNS = "wh-tenant"
	freeNS   = "wh-free"
)

// inNamespace moves a fixture to namespace ns.
func inNamespace(ns string, o client.Object) client.Object {
	o.SetNamespace(ns)
	return o
}

func withPod(mut func(*v1alpha1.PodOverrides)) func(*v1alpha1.WorkerSpec) {
	return func(s *v1alpha1.WorkerSpec) {
		s.Pod = &v1alpha1.PodOverrides{}
		mut(s.Pod)
	}
}

func resources(limits, requests map[corev1.ResourceName]string) *corev1.ResourceRequirements {
	r := &corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	for n, v := range limits {
		r.Limits[n] = resource.MustParse(v)
	}
	for n, v := range requests {
		r.Requests[n] = resource.MustParse(v)
	}
	return r
}

// policyCases check suitePolicy (envtest_test.go): each knob's allowed and refused
// values; a refusal names the field, the rule, the setting and PolicyDoc.
func policyCases() []admitCase {
	refused := func(path string, more ...string) []string {
		return append([]string{path + ": Forbidden", PolicyDoc}, more...)
	}
	rt := func(image string) func(*v1alpha1.WorkerSpec) {
		return func(s *v1alpha1.WorkerSpec) {
			s.Runtime = &v1alpha1.RuntimeSpec{Version: PinnedWorkerdVersion, Image: image}
		}
	}
	cs := []admitCase{
		{name: "policy-image-repository-tag", obj: newWorker("img-repo", limits.Paid, rt("registry.example.com/workerd:"+PinnedWorkerdVersion))},
		{name: "policy-image-registry-prefix", obj: newWorker("img-prefix", limits.Paid, rt("mirror.example.com/team/workerd@sha256:"+strings.Repeat("a", 64)))},
		{name: "policy-image-lookalike-repository", obj: newWorker("img-evil", limits.Paid, rt("registry.example.com/workerd-evil:1")),
			wantErr: refused("spec.runtime.image", `image "registry.example.com/workerd-evil:1" is not allowed`, "allowed: registry.example.com/workerd, mirror.example.com/", "--allowed-runtime-images")},
		{name: "policy-workerd-version-allowed", obj: newWorker("ver-ok", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate, s.Runtime = "2026-06-01", &v1alpha1.RuntimeSpec{Version: "1.20260601.0"}
		})},
		{name: "policy-workerd-version-refused", obj: newWorker("ver-other", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate, s.Runtime = "2026-06-01", &v1alpha1.RuntimeSpec{Version: "1.20260610.1"}
		}), wantErr: refused("spec.runtime.version", "workerd 1.20260610.1 is not allowed", "allowed: 1.20260601.0", "--allowed-workerd-versions")},
		// An image holds the release its tag names: the version must say so, so that the
		// allowed releases and the compatibility date are checked against what runs.
		{name: "policy-workerd-version-image-mismatch", obj: newWorker("ver-img", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate, s.Runtime = "2026-06-01", &v1alpha1.RuntimeSpec{Version: PinnedWorkerdVersion, Image: "registry.example.com/workerd:1.20260610.1"}
		}), wantErr: []string{"spec.runtime.version: Invalid value", `"registry.example.com/workerd:1.20260610.1" holds workerd 1.20260610.1`, UpgradesDoc}},
		{name: "policy-workerd-version-by-image-refused", obj: newWorker("ver-img-other", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate, s.Runtime = "2026-06-01", &v1alpha1.RuntimeSpec{Version: "1.20260610.1", Image: "registry.example.com/workerd:1.20260610.1"}
		}), wantErr: refused("spec.runtime.version", "workerd 1.20260610.1 is not allowed", "--allowed-workerd-versions")},
		{name: "policy-service-account-allowed", obj: newWorker("sa-ok", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) { p.ServiceAccountName = "builder" }))},
		{name: "policy-service-account-refused", obj: newWorker("sa-admin", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) { p.ServiceAccountName = "admin" })),
			wantErr: refused("spec.pod.serviceAccountName", `ServiceAccount "admin" is not allowed`, "allowed: builder", "--allowed-service-accounts")},
		{name: "policy-priority-class-allowed", obj: newWorker("pc-ok", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) { p.PriorityClassName = "batch" }))},
		{name: "policy-priority-class-refused", obj: newWorker("pc-crit", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) { p.PriorityClassName = "system-node-critical" })),
			wantErr: refused("spec.pod.priorityClassName", `priority class "system-node-critical"`, "allowed: batch", "--allowed-priority-classes")},
		{name: "policy-toleration-allowed", obj: newWorker("tol-ok", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) {
			p.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "workers", Effect: corev1.TaintEffectNoSchedule}}
		}))},
		{name: "policy-toleration-refused", obj: newWorker("tol-cp", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) {
			p.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}, {Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
		})), wantErr: refused("spec.pod.tolerations[1].key", `taint key "node-role.kubernetes.io/control-plane"`, "allowed: dedicated", "--allowed-toleration-keys")},
		{name: "policy-toleration-of-every-taint", obj: newWorker("tol-all", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) {
			p.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		})), wantErr: refused("spec.pod.tolerations[0].key", "tolerates every taint")},
		{name: "policy-node-selector-refused", obj: newWorker("node-sel", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) { p.NodeSelector = map[string]string{"pool": "payments"} })),
			wantErr: refused("spec.pod.nodeSelector", "node placement is off", "--allow-node-placement")},
		{name: "policy-affinity-refused", obj: newWorker("node-aff", limits.Paid, withPod(func(p *v1alpha1.PodOverrides) {
			p.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}}
		})), wantErr: refused("spec.pod.affinity", "--allow-node-placement")},
		{name: "policy-service-type-allowed", obj: newWorker("svc-np", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Service = &v1alpha1.WorkerServiceSpec{Type: corev1.ServiceTypeNodePort}
		})},
		{name: "policy-service-type-refused", obj: newWorker("svc-lb", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Service = &v1alpha1.WorkerServiceSpec{Type: corev1.ServiceTypeLoadBalancer}
		}), wantErr: refused("spec.service.type", "LoadBalancer is not allowed", "allowed: ClusterIP, NodePort", "--allowed-service-types")},
	}
	cs = append(cs, outboundCases()...)
	cs = append(cs, r2EndpointCases()...)
	cs = append(cs, podContractCases()...)
	return append(cs, append(resourceCases(), profileCases()...)...)
}

// outboundCases: spec.outbound.allow within the admin's bound (suitePolicy.Outbound:
// public and 10.96.0.0/12) passes, beyond it is refused; deny is the author's to add.
func outboundCases() []admitCase {
	out := func(name string, allow, deny []string) client.Object {
		return newWorker(name, limits.Paid, func(s *v1alpha1.WorkerSpec) { s.Outbound = &v1alpha1.OutboundSpec{Allow: allow, Deny: deny} })
	}
	return []admitCase{
		{name: "policy-outbound-same-token", obj: out("ob-public", []string{"public"}, []string{"private"})},
		{name: "policy-outbound-cidr-inside-bound", obj: out("ob-svc", []string{"10.96.4.0/24", "10.100.0.7"}, nil)},
		{name: "policy-outbound-public-cidr-inside-public", obj: out("ob-pubcidr", []string{"203.0.113.0/24"}, nil)},
		{name: "policy-outbound-private-refused", obj: out("ob-private", []string{"public", "private"}, nil),
			wantErr: []string{"spec.outbound.allow[1]: Forbidden", `connecting to "private" is not allowed`, "allowed: public, 10.96.0.0/12", "--allowed-outbound", PolicyDoc}},
		{name: "policy-outbound-wider-cidr-refused", obj: out("ob-wide", []string{"10.0.0.0/8"}, nil),
			wantErr: []string{"spec.outbound.allow[0]: Forbidden", `"10.0.0.0/8"`}},
		{name: "policy-outbound-loopback-refused", obj: out("ob-lo", []string{"127.0.0.1"}, nil),
			wantErr: []string{"spec.outbound.allow[0]: Forbidden", `"127.0.0.1"`}},
		{name: "policy-outbound-bad-deny", obj: out("ob-baddeny", nil, []string{"10.0.0.0/40"}),
			wantErr: []string{"spec.outbound.deny[0]: Invalid value", "neither a CIDR", "docs/outbound.md"}},
		{name: "policy-outbound-metadata-not-public", obj: out("ob-meta", []string{"169.254.169.254"}, nil),
			wantErr: []string{"spec.outbound.allow[0]: Forbidden", `"169.254.169.254"`}},
	}
}

// r2EndpointCases: an R2Bucket's endpoint whose host is an address in the admin's deny
// list (suitePolicy.OutboundDeny: 169.254.0.0/16, instance metadata) is refused: the
// sidecar would connect there for the Worker. A name is admitted (the sidecar checks the
// address it resolves to when it connects), as is an address outside the list.
func r2EndpointCases() []admitCase {
	bucket := func(name, endpoint string) client.Object {
		return &v1alpha1.R2Bucket{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}, Spec: v1alpha1.R2BucketSpec{S3: v1alpha1.S3BucketSource{
			Endpoint: endpoint, Bucket: "photos", CredentialsSecret: v1alpha1.LocalObjectReference{Name: "s3"}}}}
	}
	denied := func(host string) []string {
		return []string{"spec.s3.endpoint: Forbidden", "connecting to " + host + " is not allowed", "denied: 169.254.0.0/16",
			"--outbound-deny", "docs/outbound.md", PolicyDoc}
	}
	return []admitCase{
		{name: "policy-r2-endpoint-metadata-refused", obj: bucket("r2-meta", "http://169.254.169.254"), wantErr: denied("169.254.169.254")},
		{name: "policy-r2-endpoint-mapped-refused", obj: bucket("r2-mapped", "http://[::ffff:169.254.169.254]:80/"), wantErr: denied("::ffff:169.254.169.254")},
		{name: "policy-r2-endpoint-public-address", obj: bucket("r2-public", "https://203.0.113.5:9000")},
		{name: "policy-r2-endpoint-name", obj: bucket("r2-name", "http://s3.storage.svc.cluster.local:7070")},
		{name: "policy-ai-model-url-metadata-refused", obj: aiWorker("ai-meta", "http://169.254.169.254/v1"),
			wantErr: []string{"spec.bindings[0].ai.models[0].url: Forbidden", "connecting to 169.254.169.254 is not allowed", "ai binding",
				"denied: 169.254.0.0/16", "--outbound-deny", PolicyDoc}},
		{name: "policy-ai-model-url-name", obj: aiWorker("ai-name", "http://vllm.models.svc:8000/v1")},
	}
}

// aiWorker is a Worker whose ai binding maps one model to url.
func aiWorker(name, url string) client.Object {
	return newWorker(name, limits.Paid, func(s *v1alpha1.WorkerSpec) {
		s.Bindings = []v1alpha1.Binding{{Name: "AI", AI: &v1alpha1.AIBinding{SecretRef: v1alpha1.LocalObjectReference{Name: "workers-ai"},
			Models: []v1alpha1.AIModel{{Name: "@cf/x", Model: "x", URL: url}}}}}
	})
}

// resourceCases: spec.pod.resources within the profile (paid: memory_mib 128, so a
// container of 384Mi; one CPU) and beyond it.
func resourceCases() []admitCase {
	cpu, mem, gpu := corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceName("nvidia.com/gpu")
	res := func(name string, l, r map[corev1.ResourceName]string) client.Object {
		return newWorker(name, limits.Paid, withPod(func(p *v1alpha1.PodOverrides) { p.Resources = resources(l, r) }))
	}
	return []admitCase{
		{name: "policy-resources-within-profile", obj: res("res-ok", map[corev1.ResourceName]string{cpu: "1", mem: "384Mi"}, map[corev1.ResourceName]string{cpu: "250m", mem: "128Mi"})},
		{name: "policy-resources-memory-over-profile", obj: res("res-mem", map[corev1.ResourceName]string{cpu: "1", mem: "385Mi"}, nil),
			wantErr: []string{"spec.pod.resources.limits[memory]: Invalid value: \"385Mi\"", "must be at most 384Mi", "memory_mib ceiling 128 MiB", `profile "paid"`, PolicyDoc}},
		{name: "policy-resources-cpu-over-max", obj: res("res-cpu", map[corev1.ResourceName]string{cpu: "2", mem: "128Mi"}, nil),
			wantErr: []string{"spec.pod.resources.limits[cpu]: Forbidden", "at most 1", "--max-workerd-cpu", PolicyDoc}},
		{name: "policy-resources-limits-required", obj: res("res-nolim", nil, map[corev1.ResourceName]string{cpu: "100m", mem: "64Mi"}),
			wantErr: []string{"spec.pod.resources.limits[cpu]: Required value", "spec.pod.resources.limits[memory]: Required value", "unbounded"}},
		// A zero limit is no limit (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/):
		// the policy that requires bounded limits refuses it.
		{name: "policy-resources-zero-limits", obj: res("res-zero", map[corev1.ResourceName]string{cpu: "0", mem: "0"}, nil),
			wantErr: []string{"spec.pod.resources.limits[cpu]: Invalid value: \"0\"", "spec.pod.resources.limits[memory]: Invalid value: \"0\"", "unbounded"}},
		{name: "policy-resources-extended-refused", obj: res("res-gpu", map[corev1.ResourceName]string{cpu: "1", mem: "128Mi", gpu: "1"}, nil),
			wantErr: []string{"spec.pod.resources.limits[nvidia.com/gpu]: Forbidden", "cpu, memory and ephemeral-storage only"}},
	}
}

// profileCases: the profile a namespace may use is the admin's (label or MaxProfile),
// not the author's.
func profileCases() []admitCase {
	return []admitCase{
		{name: "policy-profile-paid-unlabelled", obj: inNamespace(tenantNS, newWorker("prof-paid", limits.Paid, nil))},
		{name: "policy-profile-custom-unlabelled", obj: inNamespace(tenantNS, newWorker("prof-custom", limits.Custom, nil)),
			wantErr: []string{"spec.limits.profile: Forbidden", `profile "custom" is not allowed in namespace "wh-tenant"`, `most permissive profile there is "paid"`, "--max-limit-profile", PolicyDoc}},
		{name: "policy-profile-free-in-free-namespace", obj: inNamespace(freeNS, newWorker("prof-free", limits.Free, nil))},
		{name: "policy-profile-paid-in-free-namespace", obj: inNamespace(freeNS, newWorker("prof-paid", limits.Paid, nil)),
			wantErr: []string{"spec.limits.profile: Forbidden", `profile "paid" is not allowed in namespace "wh-free"`, NamespaceProfileLabel + "=free"}},
		{name: "policy-profile-custom-in-custom-namespace", obj: newWorker("prof-custom", limits.Custom, nil)},
	}
}

// TestPolicyDefaultProfile: a Worker that names no profile gets the operator's default
// lowered to what its namespace may use, and is admitted.
func TestPolicyDefaultProfile(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	for ns, want := range map[string]limits.Profile{freeNS: limits.Free, tenantNS: limits.Paid, testNS: limits.Paid} {
		wk := inNamespace(ns, newWorker("dflt-profile", "", func(s *v1alpha1.WorkerSpec) { s.Limits = nil })).(*v1alpha1.Worker)
		if err := s.c.Create(ctx, wk); err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		if got := limits.Profile(wk.Spec.Limits.Profile); got != want {
			t.Errorf("namespace %s: profile %q, want %q", ns, got, want)
		}
	}
}

// TestZeroPolicyIsStrict: without any setting, every pass-through the policy governs
// is refused, and ClusterIP Workers of the paid profile without spec.pod are admitted.
func TestZeroPolicyIsStrict(t *testing.T) {
	w := staticWebhooks()
	if _, err := w.ValidateWorker(context.Background(), newWorker("plain", limits.Paid, nil)); err != nil {
		t.Fatalf("a plain Worker is refused: %v", err)
	}
	wk := newWorker("everything", limits.Custom, func(s *v1alpha1.WorkerSpec) {
		s.Runtime = &v1alpha1.RuntimeSpec{Version: PinnedWorkerdVersion, Image: "ghcr.io/workerd-operator/workerd:" + PinnedWorkerdVersion}
		s.Service = &v1alpha1.WorkerServiceSpec{Type: corev1.ServiceTypeNodePort}
		s.Pod = &v1alpha1.PodOverrides{ServiceAccountName: "default", PriorityClassName: "low", NodeSelector: map[string]string{"a": "b"},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}}
	})
	_, err := w.ValidateWorker(context.Background(), wk)
	if err == nil {
		t.Fatal("admitted")
	}
	for _, path := range []string{"spec.limits.profile", "spec.runtime.image", "spec.service.type", "spec.pod.serviceAccountName",
		"spec.pod.priorityClassName", "spec.pod.tolerations[0].key", "spec.pod.nodeSelector"} {
		if !strings.Contains(err.Error(), path+": Forbidden") {
			t.Errorf("no refusal of %s:\n%v", path, err)
		}
	}
	other := newWorker("other-workerd", limits.Paid, func(s *v1alpha1.WorkerSpec) {
		s.CompatibilityDate, s.Runtime = "2026-06-01", &v1alpha1.RuntimeSpec{Version: "1.20260601.0"}
	})
	if _, err := w.ValidateWorker(context.Background(), other); err == nil || !strings.Contains(err.Error(), "spec.runtime.version: Forbidden") ||
		!strings.Contains(err.Error(), "only the operator's workerd "+PinnedWorkerdVersion) {
		t.Errorf("another workerd version: %v", err)
	}
}

func TestImageAllowed(t *testing.T) {
	allowed := []string{"ghcr.io/org/workerd", "registry.example.com/", "docker.io/library/exact:1"}
	for image, want := range map[string]bool{
		"ghcr.io/org/workerd:1.2":                                      true,
		"ghcr.io/org/workerd@sha256:" + strings.Repeat("ab", 32):       true,
		"ghcr.io/org/workerd@sha256:abc":                               false, // not a digest
		"ghcr.io/org/workerd":                                          true,
		"ghcr.io/org/workerd/sub:1":                                    false, // another repository: its tags and digests only
		"docker.io/library/exact:1@sha256:" + strings.Repeat("ab", 32): false, // the digest, not the tag, is pulled
		"ghcr.io/org/workerd-evil:1":                                   false,
		"ghcr.io/org/workerdx":                                         false,
		"registry.example.com/any/thing:2":                             true,
		"registry.example.com.evil.io/x:1":                             false,
		"docker.io/library/exact:1":                                    true,
		"docker.io/library/exact:2":                                    false,
		"evil.io/ghcr.io/org/workerd:1":                                false,
		"":                                                             false,
		// Path components must be the distribution grammar's: no "..", "." or empty ones
		// (https://github.com/distribution/distribution/blob/main/docs/content/spec/api.md#overview).
		"ghcr.io/org/workerd/../evil:1":    false,
		"registry.example.com/../x:1":      false,
		"registry.example.com/a/./x:1":     false,
		"registry.example.com/a//x:1":      false,
		"registry.example.com/UPPER/x:1":   false,
		"ghcr.io/org/workerd:1.2@sha256:x": false,
	} {
		if got := ImageAllowed(image, allowed); got != want {
			t.Errorf("ImageAllowed(%q) = %v, want %v", image, got, want)
		}
	}
	if !ImageAllowed("anything:1", []string{AnyValue}) || ImageAllowed("anything:1", nil) {
		t.Error(`"*" must allow everything and an empty list nothing`)
	}
}

// podContractCases: spec.service.port may not be one of the pod's own ports, and
// spec.pod.labels may not set a label the operator selects pods by (docs/pod-contract.md).
func podContractCases() []admitCase {
	port := func(name string, p int32) client.Object {
		return newWorker(name, limits.Paid, func(s *v1alpha1.WorkerSpec) { s.Service = &v1alpha1.WorkerServiceSpec{Port: &p} })
	}
	labels := func(name string, l map[string]string) client.Object {
		return newWorker(name, limits.Paid, withPod(func(p *v1alpha1.PodOverrides) { p.Labels = l }))
	}
	return []admitCase{
		{name: "contract-service-port-ok", obj: port("port-ok", 8000)},
		{name: "contract-service-port-rpc", obj: port("port-rpc", podcontract.RPCPort),
			wantErr: []string{"spec.service.port: Invalid value: 9095", "the pod's own ports", "docs/pod-contract.md"}},
		{name: "contract-service-port-sidecar", obj: port("port-sidecar", podcontract.SidecarPort),
			wantErr: []string{"spec.service.port: Invalid value: 9092"}},
		{name: "contract-pod-labels-ok", obj: labels("labels-ok", map[string]string{"team": "a", "app.kubernetes.io/version": "1"})},
		{name: "contract-pod-labels-operator", obj: labels("labels-bad", map[string]string{
			podcontract.LabelWorker: "victim", podcontract.LabelAppComponent: podcontract.ManagerComponent, "team": "a"}),
			wantErr: []string{"spec.pod.labels[fleet.workerd-operator.io/worker]: Invalid value: \"victim\"",
				"spec.pod.labels[app.kubernetes.io/component]: Invalid value: \"manager\"", "the operator sets", "docs/pod-contract.md"}},
	}
}

// TestWorkerdVersionKeptOnUpdate: a Worker already running a release the policy does
// not allow (admitted before the rule, or the operator's own before an upgrade) stays
// editable with a warning; moving to such a release is refused.
func TestWorkerdVersionKeptOnUpdate(t *testing.T) {
	v := &WorkerValidator{w: staticWebhooks()}
	old := newWorker("kept", limits.Paid, func(s *v1alpha1.WorkerSpec) {
		s.CompatibilityDate, s.Runtime = "2026-06-01", &v1alpha1.RuntimeSpec{Version: "1.20260601.0"}
	})
	wk := old.DeepCopy()
	wk.Spec.Replicas = ptr[int32](3)
	warns, err := v.ValidateUpdate(context.Background(), old, wk)
	if err != nil || !strings.Contains(strings.Join(warns, "\n"), "spec.runtime.version: workerd 1.20260601.0 is no longer allowed") {
		t.Errorf("update keeping the release: %v, warnings %q", err, warns)
	}
	wk.Spec.Runtime.Version = "1.20260602.0"
	if _, err := v.ValidateUpdate(context.Background(), old, wk); err == nil || !strings.Contains(err.Error(), "spec.runtime.version: Forbidden") {
		t.Errorf("update to another release: %v", err)
	}
}

// spec.container.image: refused unless the admin allows it (each instance is a Pod
// running the image), and a Dockerfile path is named as one (docs/containers.md).
func TestValidateContainerImage(t *testing.T) {
	path := field.NewPath("spec", "container", "image")
	cases := []struct {
		name    string
		image   string
		allowed []string
		want    []string // substrings of the error; nil: admitted
	}{
		{"allowed registry", "registry.example/team/box:1", []string{"registry.example/"}, nil},
		{"any", "docker.io/library/nginx:1", []string{"*"}, nil},
		{"off by default", "registry.example/box:1", nil, []string{"spec.container.image", "not allowed", "no container image (containers are off)", "--allowed-container-images", "Helm policy.containerImages", PolicyDoc}},
		{"other registry", "evil.example/box:1", []string{"registry.example/"}, []string{"allowed: registry.example/"}},
		{"a Dockerfile", "./Dockerfile", []string{"registry.example/"}, []string{"not an image reference", "docs/containers.md"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := validateContainerImage(path, &v1alpha1.ContainerSpec{Image: tc.image}, tc.allowed)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted %q with %v", tc.image, tc.allowed)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if err := validateContainerImage(path, nil, nil); err != nil {
		t.Errorf("no spec.container refused: %v", err)
	}
}

// The admin bounds containers' instance types and maxInstances; the defaults allow up
// to one vCPU (standard-2) and 50 instances.
func TestValidateContainerPolicy(t *testing.T) {
	pol := Policy{ContainerImages: []string{"*"}}.withDefaults(limits.Paid)
	cases := []struct {
		name string
		spec v1alpha1.ContainerSpec
		want []string // substrings of the errors; nil: admitted
	}{
		{"defaults", v1alpha1.ContainerSpec{Image: "r.example/a:1"}, nil},
		{"standard-2 and 50", v1alpha1.ContainerSpec{Image: "r.example/a:1", InstanceType: "standard-2", MaxInstances: ptr[int32](50)}, nil},
		{"standard-4", v1alpha1.ContainerSpec{Image: "r.example/a:1", InstanceType: "standard-4"},
			[]string{"spec.container.instanceType", "instance type standard-4 is not allowed", "allowed: lite, basic, standard-1, standard-2", "--allowed-container-instance-types"}},
		{"51 instances", v1alpha1.ContainerSpec{Image: "r.example/a:1", MaxInstances: ptr[int32](51)},
			[]string{"spec.container.maxInstances", "51 instances at once are not allowed", "at most 50", "--max-container-instances"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &check{}
			validateContainerPolicy(c, field.NewPath("spec", "container"), &tc.spec, &pol)
			if tc.want == nil {
				if len(c.errs) != 0 {
					t.Fatalf("refused: %v", c.errs)
				}
				return
			}
			if len(c.errs) != 1 {
				t.Fatalf("errors %v, want one", c.errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.errs[0].Error(), w) {
					t.Errorf("%q lacks %q", c.errs[0].Error(), w)
				}
			}
		})
	}
}
