package realnode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	var ok, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := get(url); err != nil {
					failed.Add(1)
					mu.Lock()
					if len(failures) < 10 {
						failures = append(failures, time.Now().Format("15:04:05.000")+" "+err.Error())
					}
					mu.Unlock()
				} else {
					ok.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	patch := fmt.Sprintf(`{"spec":{"bindings":[{"name":"GREETING","text":%q},{"name":"SETTINGS","json":"{\"region\": \"local\", \"features\": [\"kv-less\", \"cron\"]}"}]}}`, newGreeting)
	if _, err := cluster.dynamicWorkers(t).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		close(stop)
		wg.Wait()
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
	close(stop)
	wg.Wait()
	t.Logf("%d requests during the rollout, %d failed", ok.Load()+failed.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d of %d requests failed during the rollout; first: %s", failed.Load(), ok.Load()+failed.Load(), strings.Join(failures, "\n  "))
	}
}
