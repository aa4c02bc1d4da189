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

// helmRelease installs (taking over the install bundle's objects: the move from `kubectl
// apply` to Helm) or upgrades release workerd-operator in the bundle's namespace to the
// chart of the tree at root, running the operator image tag tag. An install turns the
// custom metrics API on, as the bundle the suite installs does
// (TestHPAOnRequestsInFlight runs against the chart's). An upgrade is the one
// docs/upgrades.md gives: the new chart's defaults, the release's values, the new tag.
func helmRelease(ctx context.Context, root, tag string, upgrade bool) error {
	c, err := chart.Load(root)
	if err != nil {
		return err
	}
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := cluster.kubeconfig, managerNS
	flags.KubeConfig, flags.Namespace = &kc, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		return err
	}
	image := map[string]any{"image": map[string]any{"tag": tag}}
	if root == repoRoot {
		// The container images the suite pushes to the node's registry (TestContainers);
		// an older chart has no such value.
		image["policy"] = map[string]any{"containerImages": []any{registryHost + "/realnode/"}}
	}
	if upgrade {
		u := action.NewUpgrade(cfg)
		u.Namespace, u.Timeout = ns, 3*time.Minute
		u.ResetThenReuseValues = true
		// Objects the current bundle made before the previous chart took it over (a user
		// upgrading from the previous chart has none): not a step of the documented path.
		u.TakeOwnership = true
		if _, err := u.RunWithContext(ctx, "workerd-operator", c, image); err != nil {
			return fmt.Errorf("helm upgrade (%s): %w", root, err)
		}
		return nil
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = "workerd-operator", ns
	install.TakeOwnership = true
	install.Timeout = 3 * time.Minute
	image["customMetrics"] = map[string]any{"enabled": true}
	if _, err := install.RunWithContext(ctx, c, image); err != nil {
		return fmt.Errorf("helm install (%s): %w", root, err)
	}
	return nil
}

// TestHelmChartTakesOver: the manager every test runs against is the chart's (install
// took the bundle's objects over), runs in a real container under Pod Security
// "restricted", and admits and runs a new Worker.
func TestHelmChartTakesOver(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	d, err := cluster.client.AppsV1().Deployments(managerNS).Get(ctx, managerName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("Deployment %s not managed by Helm: labels %v", d.Name, d.Labels)
	}
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
