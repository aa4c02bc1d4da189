package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestRolloutWithoutFailedRequests: changing a Worker's binding (a copy of the hello
// sample, two replicas) rolls its Deployment; a client requesting through the Service all
// along (kube-proxy's rules, updated as endpoints change) sees no failed request, and ends
// up served by the new version only.
func TestRolloutWithoutFailedRequests(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	const name = "rollout"
	var hello *unstructured.Unstructured
	for _, s := range samples {
		if s.GetKind() == "Worker" && s.GetName() == "hello" {
			hello = s.DeepCopy()
		}
	}
	if hello == nil {
		t.Fatal("no hello Worker in config/samples")
	}
	hello.SetName(name)
	if err := cluster.apply(ctx, []*unstructured.Unstructured{hello}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.waitReady(ctx, []*unstructured.Unstructured{hello}, 3*time.Minute); err != nil {
		logPods(t, sampleNS, name)
		t.Fatal(err)
	}
	url := serviceURL(t, name) + "/rollout"
	const newGreeting = "Hello again from workerd-operator"
	l := startLoad(httpClient, url, 2, 20*time.Millisecond)
	t.Cleanup(l.stop)
	time.Sleep(time.Second)
	patch := fmt.Sprintf(`{"spec":{"bindings":[{"name":"GREETING","text":%q},{"name":"SETTINGS","json":"{\"region\": \"local\", \"features\": [\"kv-less\", \"cron\"]}"}]}}`, newGreeting)
	if _, err := cluster.dynamicWorkers(t).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the new version everywhere", func() error {
		d, err := cluster.client.AppsV1().Deployments(sampleNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := d.Status
		if d.Generation != st.ObservedGeneration || st.UpdatedReplicas != *d.Spec.Replicas || st.Replicas != *d.Spec.Replicas || st.ReadyReplicas != *d.Spec.Replicas {
			return fmt.Errorf("deployment status %+v", st)
		}
		for i := 0; i < 10; i++ {
			b, err := get(url)
			if err != nil {
				return err
			}
			if !strings.Contains(b, newGreeting) {
				return fmt.Errorf("still served by the old version: %q", b)
			}
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	l.stop()
	ok, failed := l.ok.Load(), l.failed.Load()
	t.Logf("%d requests during the rollout, %d failed", ok+failed, failed)
	if failed > 0 {
		t.Errorf("%d of %d requests failed during the rollout; first: %s", failed, ok+failed, strings.Join(l.failures, "\n  "))
	}
}
