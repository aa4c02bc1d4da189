package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestConfigMapSourceServes: a Worker whose modules come from a ConfigMap serves on the
// local cluster as it does on a real kubelet (test/realnode): the modules volume is
// mounted inside the config volume's directory (/etc/workerd/modules) and the rendered
// config embeds the modules by a path relative to itself.
func TestConfigMapSourceServes(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-worker-src", Namespace: sampleNS},
		Data: map[string]string{
			"index.js": "import { greeting } from \"./lib.js\";\nexport default { async fetch(req) { return new Response(greeting + new URL(req.url).pathname + \"\\n\"); } };\n",
			"lib.js":   `export const greeting = "from a ConfigMap: ";`,
		},
	}
	if err := k8sClient.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), cm) })
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.workerd-operator.io/v1alpha1",
		"kind":       "Worker",
		"metadata":   map[string]any{"name": "cm-worker", "namespace": sampleNS},
		"spec": map[string]any{
			"compatibilityDate": "2026-11-01",
			"replicas":          int64(1),
			"source":            map[string]any{"configMap": map[string]any{"name": "cm-worker-src", "main": "index.js"}},
		},
	}}
	if err := cluster.Apply(ctx, []*unstructured.Unstructured{w}, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	if err := cluster.WaitReady(ctx, []*unstructured.Unstructured{w}, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	url := serviceURL(t, "cm-worker")
	var body string
	eventually(t, time.Minute, "GET cm-worker", func() (err error) {
		body, err = get(url + "/x")
		return err
	})
	if want := "from a ConfigMap: /x"; !strings.Contains(body, want) {
		t.Errorf("body %q, want %q", body, want)
	}
}
