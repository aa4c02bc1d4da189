package chart_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/internal/chart"
	"github.com/workerd-operator/workerd-operator/internal/custommetrics"
	"github.com/workerd-operator/workerd-operator/internal/installer"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

const (
	release   = "workerd-operator"
	namespace = "workerd-operator-system"
	fleet     = "fleet.workerd-operator.io"
)

// foreignGroups are API groups whose CRDs belong to other projects (Prometheus Operator,
// cert-manager) and are not installed in the test API server: objects of these groups are
// checked field by field in their case, not applied.
var foreignGroups = []string{"monitoring.coreos.com", "cert-manager.io"}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func render(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	c, err := chart.Load(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Render(c, release, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func kinds(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func mustFind(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	o := find(objs, kind, name)
	if o == nil {
		var have []string
		for _, o := range objs {
			have = append(have, o.GetKind()+"/"+o.GetName())
		}
		t.Fatalf("no %s %s rendered; have %v", kind, name, have)
	}
	return o
}

func managerContainer(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	d := mustFind(t, objs, "Deployment", release+"-controller-manager")
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m := c.(map[string]any); m["name"] == "manager" {
			return m
		}
	}
	t.Fatal("no manager container")
	return nil
}

func args(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, a := range managerContainer(t, objs)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// wantArgs fails t unless the manager's args hold every one of want.
func wantArgs(t *testing.T, objs []*unstructured.Unstructured, want ...string) {
	t.Helper()
	a := args(t, objs)
	for _, w := range want {
		if !slices.Contains(a, w) {
			t.Errorf("manager args %v lack %s", a, w)
		}
	}
}

func nested(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no %s (%v)", o.GetKind(), o.GetName(), strings.Join(path, "."), err)
	}
	return v
}

// optionSets are the documented option sets of values.yaml; TestOptionSetsCoverValues
// checks that together they set every value.
var optionSets = []struct {
	name   string
	values string
	check  func(t *testing.T, objs []*unstructured.Unstructured)
}{
	{
		name: "defaults",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			crds := kinds(objs, "CustomResourceDefinition")
			if len(crds) != 8 {
				t.Fatalf("%d CRDs rendered, want the 8 kinds", len(crds))
			}
			for _, c := range crds {
				if got := c.GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
					t.Errorf("CRD %s: helm.sh/resource-policy=%q, want keep", c.GetName(), got)
				}
			}
			wantArgs(t, objs, "--leader-elect", "--webhook-cert-secret=$(WEBHOOK_CERT_SECRET)",
				"--workerd-image="+installer.DefaultWorkerdImage, "--default-limit-profile=paid", "--network-policies=true",
				"--failure-log-scan-interval=1m")
			for _, k := range []string{"ServiceMonitor", "PrometheusRule", "PodDisruptionBudget", "NetworkPolicy", "Certificate", "Issuer", "ConfigMap", "APIService"} {
				if n := len(kinds(objs, k)); n != 0 {
					t.Errorf("%d %s rendered by default, want none", n, k)
				}
			}
			if got := managerContainer(t, objs)["image"]; got != installer.DefaultOperatorImage {
				t.Errorf("manager image %v, want %s", got, installer.DefaultOperatorImage)
			}
		},
	},
	{
		name:   "crds not installed",
		values: `crds: {install: false}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(kinds(objs, "CustomResourceDefinition")); n != 0 {
				t.Fatalf("%d CRDs rendered with crds.install=false", n)
			}
		},
	},
	{
		name:   "cert-manager with a self-signed Issuer",
		values: `certManager: {enabled: true}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			cert := mustFind(t, objs, "Certificate", release+"-serving-cert")
			mustFind(t, objs, "Issuer", release+"-selfsigned-issuer")
			if got := nested(t, cert, "spec", "issuerRef", "name"); got != release+"-selfsigned-issuer" {
				t.Errorf("issuerRef.name %v", got)
			}
			if got := nested(t, cert, "spec", "secretName"); got != release+"-webhook-server-cert" {
				t.Errorf("secretName %v", got)
			}
			wantDNS := []any{release + "-webhook-service." + namespace + ".svc", release + "-webhook-service." + namespace + ".svc.cluster.local"}
			if got := nested(t, cert, "spec", "dnsNames"); !reflect.DeepEqual(got, wantDNS) {
				t.Errorf("dnsNames %v, want %v", got, wantDNS)
			}
			for _, k := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				for _, w := range kinds(objs, k) {
					if got := w.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != namespace+"/"+release+"-serving-cert" {
						t.Errorf("%s: inject-ca-from=%q", w.GetName(), got)
					}
				}
			}
			for _, a := range args(t, objs) {
				if strings.HasPrefix(a, "--webhook-cert-secret") {
					t.Errorf("manager still manages its certificate: %s", a)
				}
			}
			for _, n := range []string{release + "-webhook-cert-role", release + "-webhook-cert-clusterrole"} {
				if find(objs, "Role", n) != nil || find(objs, "ClusterRole", n) != nil {
					t.Errorf("%s rendered with cert-manager: the manager needs no Secret or webhook write access then", n)
				}
			}
			if find(objs, "Secret", release+"-webhook-server-cert") != nil {
				t.Error("the chart renders the certificate Secret cert-manager owns")
			}
		},
	},
	{
		name:   "cert-manager with a ClusterIssuer",
		values: `certManager: {enabled: true, issuerRef: {name: corp-ca, kind: ClusterIssuer, group: cert-manager.io}}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if find(objs, "Issuer", release+"-selfsigned-issuer") != nil {
				t.Error("self-signed Issuer rendered although issuerRef is set")
			}
			cert := mustFind(t, objs, "Certificate", release+"-serving-cert")
			want := map[string]any{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
			if got := nested(t, cert, "spec", "issuerRef"); !reflect.DeepEqual(got, want) {
				t.Errorf("issuerRef %v, want %v", got, want)
			}
		},
	},
	{
		name:   "ServiceMonitor",
		values: `metrics: {enabled: true, port: 8443, serviceMonitor: {enabled: true, interval: 15s, labels: {release: prom}}}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			sm := mustFind(t, objs, "ServiceMonitor", release+"-controller-manager")
			svc := mustFind(t, objs, "Service", release+"-metrics-service")
			if sm.GetLabels()["release"] != "prom" {
				t.Errorf("ServiceMonitor labels %v lack release=prom", sm.GetLabels())
			}
			sel := nested(t, sm, "spec", "selector", "matchLabels").(map[string]any)
			for k, v := range sel {
				if svc.GetLabels()[k] != v {
					t.Errorf("ServiceMonitor selects %s=%v; the metrics Service has %v", k, v, svc.GetLabels())
				}
			}
			ep := nested(t, sm, "spec", "endpoints").([]any)[0].(map[string]any)
			// honorLabels: the manager's series name the object's namespace (docs/alerts.md).
			if ep["interval"] != "15s" || ep["scheme"] != "https" || ep["port"] != "https" || ep["honorLabels"] != true {
				t.Errorf("endpoint %v", ep)
			}
		},
	},
	{
		name:   "alerts",
		values: `alerts: {enabled: true, labels: {release: prom}, runbookURL: "https://runbooks.example/alerts.md"}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			pr := mustFind(t, objs, "PrometheusRule", release+"-alerts")
			groups := nested(t, pr, "spec", "groups").([]any)
			rule := groups[0].(map[string]any)["rules"].([]any)[0].(map[string]any)
			url := rule["annotations"].(map[string]any)["runbook_url"]
			if pr.GetLabels()["release"] != "prom" || url != "https://runbooks.example/alerts.md#"+strings.ToLower(rule["alert"].(string)) {
				t.Errorf("PrometheusRule labels %v, first rule's runbook_url %v", pr.GetLabels(), url)
			}
		},
	},
	{
		name: "workerd metrics",
		values: `workerdMetrics: {scraperNamespace: monitoring, otlpEndpoint: "http://otel.monitoring:4318/v1/traces", podMonitor: {namespaces: [apps], interval: 20s, labels: {release: prom}},
  dashboard: {enabled: true, labels: {grafana_dashboard: "1"}}}`,
		check: checkWorkerdMetrics,
	},
	{
		name:   "invocation metrics off",
		values: `workerdMetrics: {invocations: false}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, objs, "--invocation-metrics=false")
		},
	},
	{
		name:   "request.cf",
		values: `requestCF: {colo: fra1, trustedProxies: [10.0.0.0/8, 192.0.2.1/32], geoipImage: "registry.example/geoip:2026-12"}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, objs, "--request-cf-colo=fra1", "--request-cf-trusted-proxies=10.0.0.0/8,192.0.2.1/32",
				"--request-cf-geoip-image=registry.example/geoip:2026-12")
		},
	},
	{
		name:   "metrics disabled",
		values: `metrics: {enabled: false}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if !slices.Contains(args(t, objs), "--metrics-bind-address=0") {
				t.Errorf("args %v", args(t, objs))
			}
		},
	},
	{
		name:   "three replicas with a PodDisruptionBudget",
		values: `{replicaCount: 3, leaderElection: {enabled: true}, podDisruptionBudget: {enabled: true, minAvailable: 2}}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			d := mustFind(t, objs, "Deployment", release+"-controller-manager")
			if got := fmt.Sprint(nested(t, d, "spec", "replicas")); got != "3" {
				t.Errorf("replicas %v", got)
			}
			pdb := mustFind(t, objs, "PodDisruptionBudget", release+"-controller-manager")
			if got := fmt.Sprint(nested(t, pdb, "spec", "minAvailable")); got != "2" {
				t.Errorf("minAvailable %v", got)
			}
			if !reflect.DeepEqual(nested(t, pdb, "spec", "selector", "matchLabels"), nested(t, d, "spec", "selector", "matchLabels")) {
				t.Error("the PodDisruptionBudget does not select the manager pods")
			}
		},
	},
	{
		name: "NetworkPolicies",
		values: `networkPolicy:
  workerd: false
  manager:
    enabled: true
    apiServerCIDRs: [172.18.0.2/32, 10.0.0.0/24]
    metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			mgr := mustFind(t, objs, "NetworkPolicy", release+"-manager")
			in := nested(t, mgr, "spec", "ingress").([]any)
			if len(in) != 3 {
				t.Fatalf("manager policy has %d ingress rules, want webhook, containers API and metrics", len(in))
			}
			if got := fmt.Sprint(in[1].(map[string]any)["ports"]); !strings.Contains(got, "port:9446") {
				t.Errorf("containers API rule ports %v", got)
			}
			wh := in[0].(map[string]any)
			if got := fmt.Sprint(wh["from"]); !strings.Contains(got, "172.18.0.2/32") || !strings.Contains(got, "10.0.0.0/24") {
				t.Errorf("webhook rule from %v", got)
			}
			if got := fmt.Sprint(wh["ports"]); !strings.Contains(got, "port:9443") {
				t.Errorf("webhook rule ports %v", got)
			}
			// The workerd pods' policies are the manager's (internal/specs), one per
			// Worker, DurableObjectNamespace and Workflow; the chart only switches them.
			if n := len(kinds(objs, "NetworkPolicy")); n != 1 {
				t.Errorf("%d NetworkPolicies rendered, want the manager's only", n)
			}
			wantArgs(t, objs, "--network-policies=false")
		},
	},
	{
		name:   "custom metrics API",
		values: `customMetrics: {enabled: true, port: 7443}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, objs, "--custom-metrics-port=7443")
			api := mustFind(t, objs, "APIService", custommetrics.APIServiceName)
			svc := nested(t, api, "spec", "service").(map[string]any)
			if svc["name"] != release+"-webhook-service" || fmt.Sprint(svc["port"]) != "7443" {
				t.Errorf("APIService service = %v, want the webhook Service at 7443", svc)
			}
			var ports []string
			for _, p := range nested(t, mustFind(t, objs, "Service", release+"-webhook-service"), "spec", "ports").([]any) {
				ports = append(ports, fmt.Sprint(p.(map[string]any)["port"]))
			}
			if !slices.Contains(ports, "7443") {
				t.Errorf("webhook Service ports %v: no 7443", ports)
			}
			rb := mustFind(t, objs, "RoleBinding", release+"-custom-metrics-auth-reader")
			if rb.GetNamespace() != "kube-system" {
				t.Errorf("auth reader RoleBinding in %q, want kube-system", rb.GetNamespace())
			}
			mustFind(t, objs, "ClusterRoleBinding", release+"-custom-metrics-auth-delegator")
			mustFind(t, objs, "ClusterRole", release+"-custom-metrics-apiservice")
		},
	},
	{
		name:   "custom limit profile",
		values: `limits: {defaultProfile: custom, custom: {memory_mib: 1024}}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			cm := mustFind(t, objs, "ConfigMap", release+"-custom-limits")
			data := nested(t, cm, "data", "custom.yaml").(string)
			if _, err := limits.LoadCustom([]byte(data)); err != nil {
				t.Errorf("the manager would reject the rendered ceilings: %v", err)
			}
			wantArgs(t, objs, "--default-limit-profile=custom", "--custom-limits=/etc/workerd-operator/limits/custom.yaml")
		},
	},
	{
		name: "admin policy",
		values: `policy: {runtimeImages: [registry.example/workerd, mirror.example/], containerImages: [registry.example/apps/], containerInstanceTypes: [lite, standard-4], maxContainerInstances: 200, workerdVersions: ["1.20261110.1"], serviceAccounts: [builder], priorityClasses: [batch],
  tolerationKeys: [dedicated, "*"], nodePlacement: true, serviceTypes: [NodePort, LoadBalancer], maxLimitProfile: custom, maxWorkerdCPU: "2"}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, objs, "--allowed-runtime-images=registry.example/workerd,mirror.example/", "--allowed-container-images=registry.example/apps/", "--allowed-container-instance-types=lite,standard-4", "--max-container-instances=200", "--allowed-workerd-versions=1.20261110.1", "--allowed-service-accounts=builder",
				"--allowed-priority-classes=batch", "--allowed-toleration-keys=dedicated,*", "--allow-node-placement",
				"--allowed-service-types=NodePort,LoadBalancer", "--max-limit-profile=custom", "--max-workerd-cpu=2")
		},
	},
	{
		name:   "namespaced mode",
		values: `rbac: {watchNamespaces: [apps, workerd-operator-system]}`, // the release namespace once
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, objs, "--watch-namespaces=apps,workerd-operator-system")
			if n := len(kinds(objs, "RoleBinding")); n != 2+2 { // + leader election, webhook certificate
				t.Errorf("%d RoleBindings, want 4", n)
			}
			for _, ns := range []string{"apps", namespace} {
				for _, kind := range []string{"Role", "RoleBinding"} {
					found := false
					for _, o := range kinds(objs, kind) {
						found = found || (o.GetNamespace() == ns && strings.HasPrefix(o.GetName(), release+"-manager-role"))
					}
					if !found {
						t.Errorf("no %s of the manager in namespace %s", kind, ns)
					}
				}
			}
			for _, o := range kinds(objs, "ClusterRole") {
				if o.GetName() == release+"-manager-role" {
					t.Errorf("the manager's rules are a ClusterRole in namespaced mode")
				}
			}
			mustFind(t, objs, "ClusterRole", release+"-namespace-reader")
			mustFind(t, objs, "ClusterRole", release+"-node-volume-reader")
			for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				for _, wh := range kinds(objs, kind) {
					if got := fmt.Sprint(wh.Object["webhooks"]); !strings.Contains(got, "operator:In values:[apps workerd-operator-system]") {
						t.Errorf("%s namespaceSelector: %s", kind, got)
					}
				}
			}
		},
	},
	{
		name:   "workerd pod isolation",
		values: `workerd: {runtimeClassName: gvisor, hostUsers: false, emptyDirSizeLimit: 256Mi}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, objs, "--workerd-runtime-class=gvisor", "--workerd-host-users=false", "--workerd-emptydir-size-limit=256Mi")
		},
	},
	{
		name: "outbound",
		values: `{outbound: {defaultAllow: [public, 10.0.0.0/16, 10.1.0.0/16]},
  policy: {outboundAllow: [public, private], outboundDeny: [169.254.169.254, 10.0.0.10/32]}}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, objs, "--outbound-default-allow=public,10.0.0.0/16,10.1.0.0/16",
				"--allowed-outbound=public,private", "--outbound-deny=169.254.169.254,10.0.0.10/32")
		},
	},
	{
		name:   "images and workerd version",
		values: `{image: {repository: registry.example/wo, tag: v1.2.3, pullPolicy: Always}, workerd: {repository: registry.example/workerd, version: "1.20260101.0"}, imagePullSecrets: [{name: regcred}]}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			c := managerContainer(t, objs)
			if c["image"] != "registry.example/wo:v1.2.3" || c["imagePullPolicy"] != "Always" {
				t.Errorf("image %v %v", c["image"], c["imagePullPolicy"])
			}
			if env := fmt.Sprint(c["env"]); !strings.Contains(env, "value:registry.example/wo:v1.2.3") {
				t.Errorf("OPERATOR_IMAGE not set: %s", env)
			}
			wantArgs(t, objs, "--workerd-image=registry.example/workerd:1.20260101.0", "--workerd-image-repository=registry.example/workerd")
		},
	},
	{
		name:   "existing ServiceAccount",
		values: `serviceAccount: {create: false, name: ops-operator, annotations: {}}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(kinds(objs, "ServiceAccount")); n != 0 {
				t.Errorf("%d ServiceAccounts rendered", n)
			}
			for _, k := range []string{"RoleBinding", "ClusterRoleBinding"} {
				for _, b := range kinds(objs, k) {
					if got := fmt.Sprint(b.Object["subjects"]); !strings.Contains(got, "name:ops-operator") {
						t.Errorf("%s %s binds %s", k, b.GetName(), got)
					}
				}
			}
		},
	},
	{
		name:   "ServiceAccount annotations",
		values: `serviceAccount: {create: true, name: "", annotations: {iam.example/role: operator}}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			sa := mustFind(t, objs, "ServiceAccount", release+"-controller-manager")
			if sa.GetAnnotations()["iam.example/role"] != "operator" {
				t.Errorf("annotations %v", sa.GetAnnotations())
			}
		},
	},
	{
		name:   "webhook settings",
		values: `webhook: {port: 10443, failurePolicy: Ignore, timeoutSeconds: 10}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, k := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				for _, w := range kinds(objs, k) {
					for _, wh := range w.Object["webhooks"].([]any) {
						m := wh.(map[string]any)
						svc := m["clientConfig"].(map[string]any)["service"].(map[string]any)
						if m["failurePolicy"] != "Ignore" || fmt.Sprint(m["timeoutSeconds"]) != "10" || fmt.Sprint(svc["port"]) != "10443" {
							t.Errorf("%s %v: failurePolicy %v timeoutSeconds %v port %v", k, m["name"], m["failurePolicy"], m["timeoutSeconds"], svc["port"])
						}
					}
				}
			}
			if !slices.Contains(args(t, objs), "--webhook-port=10443") {
				t.Errorf("args %v", args(t, objs))
			}
		},
	},
	{
		name: "scheduling, pod metadata, extra args, no leader election",
		values: `replicaCount: 1
leaderElection: {enabled: false}
clusterDomain: corp.internal
failureLogScanInterval: "0"
extraArgs: [--prestop-seconds=3]
podAnnotations: {example.com/a: "1"}
podLabels: {team: edge}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: ops, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}]}]}}}
priorityClassName: system-cluster-critical
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 1Gi}}`,
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			a := args(t, objs)
			if slices.Contains(a, "--leader-elect") || !slices.Contains(a, "--prestop-seconds=3") || !slices.Contains(a, "--cluster-domain=corp.internal") ||
				!slices.Contains(a, "--failure-log-scan-interval=0") {
				t.Errorf("args %v", a)
			}
			d := mustFind(t, objs, "Deployment", release+"-controller-manager")
			spec := nested(t, d, "spec", "template", "spec").(map[string]any)
			for _, k := range []string{"nodeSelector", "tolerations", "affinity", "priorityClassName"} {
				if spec[k] == nil {
					t.Errorf("pod spec lacks %s", k)
				}
			}
			if got := d.Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)["team"]; got != "edge" {
				t.Errorf("pod label team=%v", got)
			}
		},
	},
}

// TestRenderOptionSets renders the chart under each documented option set, checks what
// the option promises, and applies every object server-side with dry-run to a real
// kube-apiserver (validation, defaulting and admission of built-in kinds).
func TestRenderOptionSets(t *testing.T) {
	cfg := startAPIServer(t)
	for _, tc := range optionSets {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			objs := render(t, vals)
			tc.check(t, objs)
			dryRunApply(t, cfg, objs)
		})
	}
}

// startAPIServer starts envtest without CRDs, creates the namespaces the option sets
// use, and installs the chart's own CRDs (default values) for real: the API server
// accepts them as the chart renders them.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiserver")
	}
	env, err := testenv.NewEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil
	env.ErrorIfCRDPathMissing = false
	cfg, err := testenv.StartEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	var nss []*unstructured.Unstructured
	for _, ns := range []string{namespace, "apps"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Namespace")
		u.SetName(ns)
		nss = append(nss, u)
	}
	apply(t, cfg, nss, false)
	apply(t, cfg, kinds(render(t, nil), "CustomResourceDefinition"), false)
	return cfg
}

func dryRunApply(t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	var own []*unstructured.Unstructured
	for _, o := range objs {
		if !slices.Contains(foreignGroups, o.GroupVersionKind().Group) {
			own = append(own, o)
		}
	}
	apply(t, cfg, own, true)
}

// apply server-side applies objs (forced, field manager "chart-test"), with dry-run if asked.
func apply(t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "chart-test", Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				t.Errorf("%s %s: namespaced object without metadata.namespace (helm template output would land in the caller's namespace)", gvk.Kind, o.GetName())
				continue
			}
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ri.Patch(context.Background(), o.GetName(), types.ApplyPatchType, data, opts); err != nil {
			t.Errorf("apply %s %s/%s (dry-run %v): %v", gvk.Kind, o.GetNamespace(), o.GetName(), dryRun, err)
		}
	}
}

// TestSchemaRejectsWrongTypes: values.schema.json turns away values of the wrong type or
// outside their set, naming the value's path.
func TestSchemaRejectsWrongTypes(t *testing.T) {
	c, err := chart.Load(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		values string
		want   []string
	}{
		{`replicaCount: two`, []string{"/replicaCount", "got string, want integer"}},
		{`crds: {install: "yes"}`, []string{"/crds/install", "got string, want boolean"}},
		{`limits: {defaultProfile: enterprise}`, []string{"/limits/defaultProfile", "free", "paid", "custom"}},
		{`policy: {serviceTypes: [ExternalName]}`, []string{"/policy/serviceTypes/0", "NodePort", "LoadBalancer"}},
		{`policy: {maxWorkerdCPU: lots}`, []string{"/policy/maxWorkerdCPU", "does not match pattern"}},
		{`outbound: {defaultAllow: [internet]}`, []string{"/outbound/defaultAllow/0", "does not match pattern"}},
		{`workerd: {version: latest}`, []string{"/workerd/version", "does not match pattern"}},
		{`policy: {workerdVersions: [latest]}`, []string{"/policy/workerdVersions/0", "does not match pattern"}},
		{`webhook: {timeoutSeconds: 60}`, []string{"/webhook/timeoutSeconds", "maximum"}},
		{`failureLogScanInterval: 1 minute`, []string{"/failureLogScanInterval", "does not match pattern"}},
		{`alerts: {runbookURL: "docs/alerts.md#top"}`, []string{"/alerts/runbookURL", "does not match pattern"}},
		{`replicas: 2`, []string{"additional properties 'replicas' not allowed"}},
	} {
		t.Run(tc.values, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			_, err = chart.Render(c, release, namespace, vals)
			if err == nil {
				t.Fatalf("values %s accepted", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestTemplateFailures: combinations the schema cannot express fail with a message
// naming the value.
func TestTemplateFailures(t *testing.T) {
	c, err := chart.Load(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ values, want string }{
		{`networkPolicy: {manager: {enabled: true}}`, "networkPolicy.manager.apiServerCIDRs: at least one CIDR is required"},
		{`{replicaCount: 2, leaderElection: {enabled: false}}`, "replicaCount > 1 needs leaderElection.enabled"},
		{`serviceAccount: {create: false}`, "serviceAccount.name is required"},
	} {
		vals, err := chartutil.ReadValues([]byte(tc.values))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chart.Render(c, release, namespace, vals); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %s: error %v, want %q", tc.values, err, tc.want)
		}
	}
}

// TestOptionSetsCoverValues: every value of values.yaml is set by at least one option set.
func TestOptionSetsCoverValues(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), chart.Dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(b, &defaults); err != nil {
		t.Fatal(err)
	}
	var set []string
	for _, tc := range optionSets {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(tc.values), &v); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		set = append(set, leaves("", v)...)
	}
	for _, p := range leaves("", defaults) {
		covered := false
		for _, q := range set {
			if q == p || strings.HasPrefix(q, p+".") || strings.HasPrefix(p, q+".") {
				covered = true
				break
			}
		}
		if !covered {
			t.Errorf("value %s is set by no option set", p)
		}
	}
}

func leaves(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		p := strings.TrimPrefix(prefix+"."+k, ".")
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			out = append(out, leaves(p, sub)...)
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestCopiesInSync: the chart's copies of generated manifests equal their sources
// (`make manifests` copies them).
func TestCopiesInSync(t *testing.T) {
	root := repoRoot(t)
	pairs := map[string]string{
		"config/rbac/role.yaml":         "files/rbac/role.yaml",
		"config/webhook/manifests.yaml": "files/webhook/manifests.yaml",
	}
	src, _ := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	dst, _ := filepath.Glob(filepath.Join(root, chart.Dir, "files/crds/*.yaml"))
	if len(src) != len(dst) {
		t.Errorf("config/crd/bases has %d CRDs, the chart's files/crds %d: run make manifests", len(src), len(dst))
	}
	for _, s := range src {
		pairs["config/crd/bases/"+filepath.Base(s)] = "files/crds/" + filepath.Base(s)
	}
	for from, to := range pairs {
		a, err := os.ReadFile(filepath.Join(root, from))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, chart.Dir, to))
		if err != nil {
			t.Errorf("%s: %v (run make manifests)", to, err)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s/%s differs from %s: run make manifests", chart.Dir, to, from)
		}
	}
}

// TestSameAsInstallBundle: with release name workerd-operator in workerd-operator-system,
// the chart renders every object of dist/install.yaml (but the Namespace) under the same
// name, with the same RBAC rules, manager pod, Services, webhooks and CRD schemas, so both
// install paths grant and run the same thing (and a bundle install can be adopted by Helm).
func TestSameAsInstallBundle(t *testing.T) {
	bundle, err := installer.Build(repoRoot(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	var want []*unstructured.Unstructured
	for _, doc := range strings.Split(string(bundle), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 && u.GetKind() != "Namespace" {
			want = append(want, u)
		}
	}
	objs := render(t, nil)
	if len(objs) != len(want) {
		t.Errorf("chart renders %d objects, the bundle has %d besides its Namespace", len(objs), len(want))
	}
	for _, w := range want {
		got := find(objs, w.GetKind(), w.GetName())
		if got == nil {
			t.Errorf("the chart has no %s %s", w.GetKind(), w.GetName())
			continue
		}
		if got.GetNamespace() != w.GetNamespace() {
			t.Errorf("%s %s in namespace %q, bundle %q", w.GetKind(), w.GetName(), got.GetNamespace(), w.GetNamespace())
		}
		var paths [][]string
		switch w.GetKind() {
		case "ClusterRole", "Role":
			paths = [][]string{{"rules"}}
		case "ClusterRoleBinding", "RoleBinding":
			paths = [][]string{{"roleRef"}, {"subjects"}}
		case "Service":
			paths = [][]string{{"spec"}}
		case "Secret":
			paths = [][]string{{"type"}}
		case "CustomResourceDefinition":
			paths = [][]string{{"spec"}}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			paths = [][]string{{"webhooks"}}
		case "Deployment":
			paths = [][]string{{"spec", "selector"}, {"spec", "replicas"}, {"spec", "template", "spec", "securityContext"},
				{"spec", "template", "spec", "serviceAccountName"}, {"spec", "template", "spec", "volumes"}}
			wc, gc := container(w), container(got)
			for _, k := range []string{"image", "env", "ports", "readinessProbe", "livenessProbe", "resources", "securityContext", "volumeMounts"} {
				if !reflect.DeepEqual(wc[k], gc[k]) {
					t.Errorf("manager container %s: chart %v, bundle %v", k, gc[k], wc[k])
				}
			}
			for _, a := range wc["args"].([]any) {
				if !slices.Contains(gc["args"].([]any), a) {
					t.Errorf("manager args: the chart lacks %v of the bundle", a)
				}
			}
		}
		for _, p := range paths {
			a, _, _ := unstructured.NestedFieldNoCopy(w.Object, p...)
			b, _, _ := unstructured.NestedFieldNoCopy(got.Object, p...)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s %s %s differs:\nchart:  %v\nbundle: %v", w.GetKind(), w.GetName(), strings.Join(p, "."), b, a)
			}
		}
	}
}

// TestWebhooksSkipKubeSystem: every webhook of the chart (and so of the install
// bundle, TestSameAsInstallBundle) carries a namespace selector that keeps it off
// kube-system, so an operator outage with failurePolicy Fail never touches the
// system namespace (issue 4: "a selector that keeps the webhook off kube-system").
// The API server honours the selector: internal/webhook's envtest suite uses the
// same selector for its "without webhooks" namespace.
func TestWebhooksSkipKubeSystem(t *testing.T) {
	objs := render(t, nil)
	n := 0
	for _, k := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, w := range kinds(objs, k) {
			for _, wh := range w.Object["webhooks"].([]any) {
				m := wh.(map[string]any)
				n++
				exprs, _, _ := unstructured.NestedSlice(m, "namespaceSelector", "matchExpressions")
				ok := false
				for _, e := range exprs {
					e := e.(map[string]any)
					ok = ok || (e["key"] == "kubernetes.io/metadata.name" && e["operator"] == "NotIn" && slices.Contains(e["values"].([]any), any("kube-system")))
				}
				if !ok {
					t.Errorf("%s webhook %v: namespaceSelector %v does not exclude kube-system", k, m["name"], m["namespaceSelector"])
				}
			}
		}
	}
	if n != 9 {
		t.Errorf("%d webhooks rendered, want 9 (a defaulter and a validator per kind with defaults, a validator for R2Bucket)", n)
	}
}

func container(u *unstructured.Unstructured) map[string]any {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	return cs[0].(map[string]any)
}

// TestHelmLint runs Helm's chart linter (`helm lint --strict`: Chart.yaml, values, schema,
// templates against the Kubernetes version pinned by the project): no warning, no error.
func TestHelmLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(testenv.KubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	l := lint.AllWithKubeVersion(filepath.Join(repoRoot(t), chart.Dir), nil, namespace, kv)
	for _, m := range l.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint: %s", m)
		} else {
			t.Logf("helm lint: %s", m)
		}
	}
}

// TestNoLookupNoHooks: Argo CD and other GitOps tools render with `helm template`, which
// has no cluster to look up and runs no hooks, so the chart uses neither.
func TestNoLookupNoHooks(t *testing.T) {
	c, err := chart.Load(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Templates {
		for _, banned := range []string{"lookup", "helm.sh/hook"} {
			if bytes.Contains(f.Data, []byte(banned)) {
				t.Errorf("%s uses %q", f.Name, banned)
			}
		}
	}
}

// TestManagerPodLabels: the manager pods of the chart and of config/manager (the install
// bundle) carry podcontract.ManagerPodLabels, by which the workerd pods'
// NetworkPolicies admit the manager to the trigger and sidecar ports.
func TestManagerPodLabels(t *testing.T) {
	d := mustFind(t, render(t, nil), "Deployment", release+"-controller-manager")
	fromChart := nested(t, d, "spec", "template", "metadata", "labels").(map[string]any)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var fromConfig map[string]any
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Deployment" {
			fromConfig = nested(t, u, "spec", "template", "metadata", "labels").(map[string]any)
		}
	}
	for where, got := range map[string]map[string]any{"chart": fromChart, "config/manager": fromConfig} {
		for k, v := range podcontract.ManagerPodLabels() {
			if got[k] != v {
				t.Errorf("%s: manager pod label %s=%v, want %s", where, k, got[k], v)
			}
		}
	}
}
