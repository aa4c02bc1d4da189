package realnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/workerd-operator/workerd-operator/internal/chart"
)

// TestHelmChartTakesOver installs the Helm chart over the install bundle (the migration
// from `kubectl apply` to Helm, release workerd-operator in the bundle's namespace), waits
// for the chart's manager to run in a real container under Pod Security "restricted", and
// has it admit and run a new Worker. It runs first (file order): every later test runs
// against the chart's manager.
func TestHelmChartTakesOver(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	c, err := chart.Load(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := cluster.kubeconfig, managerNS
	flags.KubeConfig, flags.Namespace = &kc, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = "workerd-operator", ns
	install.TakeOwnership = true
	install.Timeout = 3 * time.Minute
	// As the bundle it takes over (config/custom-metrics): TestHPAOnRequestsInFlight
	// runs against the chart's custom metrics API.
	if _, err := install.RunWithContext(ctx, c, map[string]any{"customMetrics": map[string]any{"enabled": true}}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	var name string
	for _, o := range bundle {
		if o.GetKind() == "Deployment" {
			name = o.GetName()
		}
	}
	eventually(t, 3*time.Minute, "the chart's manager rolled out", func() error {
		d, err := cluster.client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			return fmt.Errorf("Deployment %s not managed by Helm: labels %v", name, d.Labels)
		}
		st, want := d.Status, *d.Spec.Replicas
		if st.ObservedGeneration != d.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.Replicas != want {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	// The chart's manager admits (its webhook) and runs a Worker.
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleetGroup + "/v1alpha1",
		"kind":       "Worker",
		"metadata":   map[string]any{"name": "helm-worker", "namespace": sampleNS},
		"spec": map[string]any{
			"compatibilityDate": "2026-11-01",
			"replicas":          int64(1),
			"source": map[string]any{"inline": map[string]any{"modules": []any{map[string]any{
				"name": "worker.js", "type": "ESModule",
				"content": `export default { fetch(req) { return new Response("from the chart's manager" + new URL(req.url).pathname + "\n"); } };`,
			}}}},
		},
	}}
	if err := cluster.apply(ctx, []*unstructured.Unstructured{w}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.waitReady(ctx, []*unstructured.Unstructured{w}, 3*time.Minute); err != nil {
		logPods(t, sampleNS, "helm-worker")
		t.Fatal(err)
	}
	var body string
	eventually(t, time.Minute, "GET helm-worker", func() (err error) {
		body, err = get(serviceURL(t, "helm-worker") + "/x")
		return err
	})
	if want := "from the chart's manager/x"; body != want+"\n" {
		t.Errorf("body %q, want %q", body, want)
	}
}
