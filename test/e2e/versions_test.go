package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/versions"
)

// TestGradualDeployment: while a client calls a Durable Object method and
// env.WF.create/status/sendEvent through the Worker at 25 requests/s, a new version is
// uploaded without being deployed, split 90/10 with the running one, rolled back out of
// the split with one command (`workerd-operator rollback canary ID`'s code path), then
// promoted to 100 percent: every request succeeds, and 2,000 requests sent during the
// split are served 90/10 within 3 points
// (https://developers.cloudflare.com/workers/versions-and-deployments/gradual-deployments/).
// The Durable Objects and the Workflow engine run the version with the larger share.
func TestGradualDeployment(t *testing.T) {
	ctx := context.Background()
	w, d, wf := newRollerAs(t, "canary", "canarycount", "canaryflow")
	url := serviceURL(t, "canary")
	for _, p := range []string{"/do?k=warm", "/wf?id=warm"} {
		eventually(t, 2*time.Minute, "warm-up "+p, func() error { _, err := get(url + p); return err })
	}
	v1 := w.Spec.VersionID()
	l := &loadLoop{url: url, rate: 25, stop: make(chan struct{})}
	phases := []string{"steady", "upload v2", "split 90/10", "rollback to v1", "promote v2", "after"}
	results := make([]*loadResult, len(phases))
	for i := range results {
		results[i] = &loadResult{}
	}
	l.cur.Store(results[0])
	start := time.Now()
	go l.run()
	time.Sleep(5 * time.Second)

	l.cur.Store(results[1])
	v2 := uploadVersion(t, w, rollerModule("v2"), v1)
	l.cur.Store(results[2])
	began := time.Now()
	if err := versions.Deploy(ctx, k8sClient, sampleNS, "canary", []fleetv1alpha1.DeploymentVersion{{VersionID: v1, Percentage: 90}, {VersionID: v2, Percentage: 10}}); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, "canary", true)
	t.Logf("split in %s", time.Since(began).Round(time.Second))
	measureSplit(t, url, map[string]int{"v1": 90, "v2": 10})
	checkDurableObjectsRun(t, url, "v1")

	l.cur.Store(results[3])
	to, err := versions.Rollback(ctx, k8sClient, sampleNS, "canary", v1)
	if err != nil || len(to) != 1 || to[0].VersionID != v1 {
		t.Fatalf("rollback: %v %v", to, err)
	}
	waitDeployment(t, "canary", false)
	checkDurableObjectsRun(t, url, "v1")
	l.cur.Store(results[4])
	gens := setGenerations(t, d, wf)
	if err := versions.Deploy(ctx, k8sClient, sampleNS, "canary", []fleetv1alpha1.DeploymentVersion{{VersionID: "latest", Percentage: 100}}); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, "canary", false)
	waitSetsRolled(t, gens)
	l.cur.Store(results[5])
	time.Sleep(5 * time.Second)
	close(l.stop)
	elapsed := time.Since(start)
	l.wg.Wait()

	var sent, failed int64
	for i, r := range results {
		sent, failed = sent+r.sent.Load(), failed+r.failed.Load()
		t.Logf("%-16s sent %5d  ok %5d  failed %d  by version %v", phases[i], r.sent.Load(), r.ok.Load(), r.failed.Load(), r.byCode())
	}
	fmt.Printf("gradual deployment: %d requests sent in %s (%.1f/s), %d failed\n", sent, elapsed.Round(time.Second), float64(sent)/elapsed.Seconds(), failed)
	if failed != 0 {
		t.Errorf("%d of %d requests failed:\n%s", failed, sent, strings.Join(l.failures[:min(len(l.failures), 30)], "\n"))
	}
	for i, only := range map[int]string{0: "v1", 1: "v1", 5: "v2"} {
		if got := results[i].byCode(); got[only] != sum(got) {
			t.Errorf("%s: answers by version %v, want %s only", phases[i], got, only)
		}
	}
	checkDurableObjectsRun(t, url, "v2")
	checkDeploymentStatus(t, v2, v1)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// checkDeploymentStatus: status.deployment is now at 100, status.previousDeployment was
// at 100 before it.
func checkDeploymentStatus(t *testing.T, now, before string) {
	t.Helper()
	w := &fleetv1alpha1.Worker{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: "canary"}, w); err != nil {
		t.Fatal(err)
	}
	if len(w.Status.Deployment) != 1 || w.Status.Deployment[0].VersionID != now || w.Status.Deployment[0].Percentage != 100 {
		t.Errorf("status.deployment %+v, want %s at 100", w.Status.Deployment, now)
	}
	if len(w.Status.PreviousDeployment) != 1 || w.Status.PreviousDeployment[0].VersionID != before {
		t.Errorf("status.previousDeployment %+v, want %s at 100", w.Status.PreviousDeployment, before)
	}
}

// uploadVersion changes w's code to module while pinning the deployment to the
// running version (wrangler versions upload): the new version is stored, listed in
// status.versions, and not deployed.
func uploadVersion(t *testing.T, w *fleetv1alpha1.Worker, module, running string) string {
	t.Helper()
	ctx := context.Background()
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec.Source.Inline.Modules[0].Content = ptr.To(module)
	w.Spec.Deployment = &fleetv1alpha1.WorkerDeployment{Versions: []fleetv1alpha1.DeploymentVersion{{VersionID: running, Percentage: 100}}}
	if err := k8sClient.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	id := w.Spec.VersionID()
	eventually(t, 2*time.Minute, "version "+id+" stored", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		if len(w.Status.Versions) < 2 || w.Status.Versions[0].ID != id || w.Status.ObservedGeneration != w.Generation {
			return fmt.Errorf("status.versions %+v at generation %d of %d", w.Status.Versions, w.Status.ObservedGeneration, w.Generation)
		}
		return nil
	})
	return id
}

// waitDeployment waits until Worker name is Ready at its generation and its split
// Deployment runs pods (split) or none: with a split, both Deployments' pods all run
// templates that split, and no pod of the Worker is left terminating.
func waitDeployment(t *testing.T, name string, split bool) {
	t.Helper()
	ctx := context.Background()
	began := time.Now()
	eventually(t, 6*time.Minute, fmt.Sprintf("Worker %s deployed (split %v)", name, split), func() error {
		w := &fleetv1alpha1.Worker{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, w); err != nil {
			return err
		}
		if w.Status.ObservedGeneration != w.Generation || !meta.IsStatusConditionTrue(w.Status.Conditions, "Ready") {
			return fmt.Errorf("Worker not Ready at generation %d: %+v", w.Generation, w.Status.Conditions)
		}
		sd := &appsv1.Deployment{}
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: specs.SplitDeploymentName(name)}, sd)
		if !split {
			if err == nil && (*sd.Spec.Replicas != 0 || sd.Status.Replicas != 0) {
				return fmt.Errorf("split Deployment %s: %d pods, want it scaled to zero", sd.Name, sd.Status.Replicas)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return workerRolled(ctx, name)
		}
		if err != nil {
			return err
		}
		for _, n := range []string{name, sd.Name} {
			if err := workerRolled(ctx, n); err != nil {
				return err
			}
			dep := &appsv1.Deployment{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: n}, dep); err != nil {
				return err
			}
			if dep.Spec.Template.Annotations[podcontract.AnnotationSplit] == "" {
				return fmt.Errorf("deployment %s does not split yet", n)
			}
		}
		return nil
	})
	t.Logf("deployed in %s", time.Since(began).Round(time.Second))
}

// measureSplit sends 2,000 GET /do requests (8 at a time) and checks each code
// version's share against want (percent) within 3 points.
func measureSplit(t *testing.T, url string, want map[string]int) {
	t.Helper()
	const total = 2000
	var next atomic.Int64
	var mu sync.Mutex
	got := map[string]int{}
	var failures []string
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: time.Minute}
	l := &loadLoop{url: url}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= total; i = next.Add(1) {
				code, err := l.one(hc, fmt.Sprintf("/do?k=m%d", i%16))
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				} else {
					got[code]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("split measured over %d requests: %v", total, got)
	fmt.Printf("gradual deployment: %d requests during the split: %v (want %v percent)\n", total, got, want)
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed: %v", len(failures), total, failures[:min(len(failures), 10)])
	}
	for code, pct := range want {
		share := float64(got[code]) * 100 / total
		if share < float64(pct)-3 || share > float64(pct)+3 {
			t.Errorf("%s served %.1f %% of %d requests, want %d ± 3", code, share, total, pct)
		}
	}
}

// setGenerations are the generations of d's shard set and wf's engine set.
func setGenerations(t *testing.T, d *fleetv1alpha1.DurableObjectNamespace, wf *fleetv1alpha1.Workflow) map[string]int64 {
	t.Helper()
	sets := map[string]int64{render.ShardSetName(d.Name): 0, render.EngineSetName(wf.Name): 0}
	for name := range sets {
		sts := &appsv1.StatefulSet{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: name}, sts); err != nil {
			t.Fatal(err)
		}
		sets[name] = sts.Generation
	}
	return sets
}

// waitSetsRolled waits until every set of gens has rolled past its generation: the
// Durable Objects and the engine run the newly deployed version.
func waitSetsRolled(t *testing.T, gens map[string]int64) {
	t.Helper()
	eventually(t, 6*time.Minute, "shards and engine rolled", func() error {
		for name, gen := range gens {
			if err := statefulSetRolled(context.Background(), name, gen); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkDurableObjectsRun: the Durable Object class answering runs code version code.
func checkDurableObjectsRun(t *testing.T, url, code string) {
	t.Helper()
	body, err := get(url + "/doclass?k=last")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `"`+code+`"`) {
		t.Errorf("the Durable Object answered %s, want it to run %s", body, code)
	}
}
