package e2e

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/deploy"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestContainersTemplate deploys Cloudflare's containers-template unchanged: its
// Dockerfile's server is built without Docker (testenv.ServerImage) and named with
// --container-image, its containers[] entry becomes the class's spec.container, and
// Cloudflare's Playwright spec passes. The local cluster runs pods as processes on the
// machine's network, where the template's server cannot have port 8080 to itself, so a
// container start here goes from workerd through the shard's sidecar and the manager's
// container API to the kubelet, which refuses the unmapped image; the real-node suite
// runs instances (docs/containers.md).
func TestContainersTemplate(t *testing.T) {
	const name = "containers-template"
	src := filepath.Join(repoRoot, "test", "testdata", "cloudflare-templates", name)
	dir, err := testenv.CopyProject(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	image, _, err := testenv.ServerImage(filepath.Join(src, "container_src"), cluster.RegistryHost()+"/e2e/containers-template-server:1")
	if err != nil {
		t.Fatal(err)
	}
	d := deployDir(t, dir, func(o *deploy.Options) { o.ContainerImages = map[string]string{"MyContainer": image} })
	dons := &fleetv1alpha1.DurableObjectNamespace{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: "containers-template-my-container"}, dons); err != nil {
		t.Fatal(err)
	}
	// wrangler.jsonc: "image": "./Dockerfile", "max_instances": 10.
	if c := dons.Spec.Container; c == nil || c.Image != image || c.MaxInstancesOrDefault() != 10 {
		t.Errorf("spec.container %+v, want image %s and maxInstances 10", dons.Spec.Container, image)
	}
	if got, err := get(d.url + "/"); err != nil || !strings.Contains(got, "GET /container/<ID>") {
		t.Errorf("GET / = %q, %v; want the template's list of endpoints", got, err)
	}
	resp, err := httpClient.Get(d.url + "/container/e2e")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// @cloudflare/containers answers a start that fails with 500 "Failed to start
	// container: ..."; workerd keeps the engine's reason out of it, the sidecar logs it.
	if resp.StatusCode != http.StatusInternalServerError || !strings.HasPrefix(string(body), "Failed to start container") {
		t.Errorf("GET /container/e2e = %d %q; want the library's 500 for a start that failed", resp.StatusCode, body)
	}
	if logs := shardLog(t, "containers-template-my-container-do-0", podcontract.SidecarContainer); !strings.Contains(logs, "ErrImageNeverPull") || !strings.Contains(logs, image) {
		t.Errorf("the shard's sidecar does not log the kubelet's ErrImageNeverPull for %s (the start did not reach an instance Pod):\n%s", image, logs)
	}
	runSpecFile(t, name, filepath.Join(src, "..", "playwright-tests", name+".spec.ts"), d.url)
}

// shardLog is container c's log of pod name in sampleNS.
func shardLog(t *testing.T, name, c string) string {
	t.Helper()
	b, err := cluster.Client().CoreV1().Pods(sampleNS).GetLogs(name, &corev1.PodLogOptions{Container: c}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
