package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// checkObject: object o's acknowledged increments are 1..k exactly once each (none
// lost, none applied by two copies from one state), and its instances never
// interleave: once a later instance answered, an earlier one never answers again (two
// live copies of an object would).
func checkObject(answers []testenv.TallyAnswer) error {
	sort.Slice(answers, func(i, j int) bool { return answers[i].N < answers[j].N })
	for i, a := range answers {
		if a.N != i+1 {
			return fmt.Errorf("acknowledged counts %v: want 1..%d once each", counts(answers), len(answers))
		}
	}
	if a := testenv.AnsweredAgain(answers); a != nil {
		return fmt.Errorf("instance %s answered again after a later one (at n=%d): two copies served the object", a.Token, a.N)
	}
	return nil
}

func counts(as []testenv.TallyAnswer) []int {
	out := make([]int, len(as))
	for i, a := range as {
		out[i] = a.N
	}
	return out
}

// TestReshardUnderLoad (docs/scaling.md): while a client increments counters of 1,000
// Durable Objects at 25 calls/s, the namespace goes 2 → 8 → 3 shards. No call fails,
// every counter ends exact, and no object is served by two instances at once.
func TestReshardUnderLoad(t *testing.T) {
	ctx := context.Background()
	s3 := backupS3(t, "reshard-s3")
	w := &fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "tally"}, Spec: fleetv1alpha1.WorkerSpec{
		CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](2),
		Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
			Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(testenv.TallyModule)}}}},
		Bindings: []fleetv1alpha1.Binding{{Name: "TALLY", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: "tallies"}}},
	}}
	d := &fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "tallies"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "tally"}, ClassName: "Tally", SQL: true,
			Shards: ptr.To[int32](2), Storage: &fleetv1alpha1.StorageSpec{ReclaimPolicy: fleetv1alpha1.ReclaimDelete},
			Backup: &fleetv1alpha1.BackupSpec{S3: s3}}}
	for _, o := range []client.Object{w, d} {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	waitReady(t, d, 5*time.Minute)
	waitWorkerReady(t, "tally")
	url := serviceURL(t, "tally")
	eventually(t, 2*time.Minute, "warm-up", func() error { _, err := get(url + "/inc?o=warm"); return err })

	l := testenv.StartTallyLoad(url, 25, 1000, func() { time.Sleep(2 * time.Second); podLogLines(t, "rror", "tally-", "tallies-do-") })
	t.Cleanup(l.Stop)
	// The objects called in the first 10 s get an alarm 45 s ahead: due while or
	// after their objects move (Cloudflare: at least once,
	// https://developers.cloudflare.com/durable-objects/api/alarms/).
	l.AlarmMs.Store(45000)
	start := time.Now()
	time.Sleep(10 * time.Second)
	l.AlarmMs.Store(0)
	var moves []string
	for _, n := range []int32{8, 3} {
		moves = append(moves, reshardTo(t, d, n))
		time.Sleep(10 * time.Second)
	}
	elapsed := time.Since(start)
	l.Stop()

	sent, failed := l.Sent.Load(), l.Failed.Load()
	fmt.Printf("reshard: %d calls in %s (%.1f/s), %d failed; %s\n", sent, elapsed.Round(time.Second), float64(sent)/elapsed.Seconds(), failed, strings.Join(moves, "; "))
	if failed != 0 {
		t.Errorf("%d of %d calls failed:\n%s", failed, sent, strings.Join(l.Failures(30), "\n"))
	}
	checked := 0
	for o, as := range l.Answers() {
		if err := checkObject(as); err != nil {
			t.Errorf("object o%d: %v", o, err)
		}
		got, err := get(fmt.Sprintf("%s/get?o=%d", url, o))
		if err != nil || strings.TrimSpace(got) != fmt.Sprint(len(as)) {
			t.Errorf("object o%d: counter %q (%v) at the end, want %d (its acknowledged increments)", o, got, err, len(as))
		}
		checked++
	}
	t.Logf("%d objects checked, %d calls acknowledged", checked, sent-failed)
	checkAlarms(t, url, l.Alarmed())
}

// checkAlarms: every alarm set before the moves ran on the object's owner, none is
// left pending.
func checkAlarms(t *testing.T, url string, alarmed map[int]bool) {
	t.Helper()
	ran := 0
	for o := range alarmed {
		var st struct {
			Fired   int  `json:"fired"`
			Pending *int `json:"pending"`
		}
		b, err := get(fmt.Sprintf("%s/alarms?o=%d", url, o))
		if err == nil {
			err = json.Unmarshal([]byte(b), &st)
		}
		if err != nil || st.Fired < 1 || st.Pending != nil {
			t.Errorf("object o%d: alarm ran %d times, pending %v (%v), want it run and none pending", o, st.Fired, st.Pending, err)
			continue
		}
		ran++
	}
	t.Logf("%d of %d alarms set before the moves ran", ran, len(alarmed))
}

// reshardTo sets d's spec.shards to n and waits until the change finished; it returns
// the move's figures.
func reshardTo(t *testing.T, d *fleetv1alpha1.DurableObjectNamespace, n int32) string {
	t.Helper()
	ctx := context.Background()
	cur := &fleetv1alpha1.DurableObjectNamespace{}
	var from int32
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			return err
		}
		from = cur.SpecShards()
		cur.Spec.Shards = ptr.To(n)
		return k8sClient.Update(ctx, cur)
	}); err != nil {
		t.Fatal(err)
	}
	var last *fleetv1alpha1.ReshardStatus
	eventually(t, 5*time.Minute, fmt.Sprintf("reshard %d → %d", from, n), func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			return err
		}
		last = cur.Status.LastReshard
		if cur.Status.Resharding != nil || last == nil || last.To != n || last.From != from {
			return fmt.Errorf("resharding %+v, last %+v", cur.Status.Resharding, last)
		}
		return nil
	})
	waitReady(t, cur, 3*time.Minute)
	waitWorkerReady(t, "tally")
	logShardStarts(t, last)
	return fmt.Sprintf("%d → %d shards in %s (%s to %s; stopped after %s)", from, n, last.FinishedAt.Sub(last.StartedAt.Time).Round(time.Second),
		last.StartedAt.Format("15:04:05"), last.FinishedAt.Format("15:04:05"), last.StoppedAt.Sub(last.StartedAt.Time).Round(time.Second))
}

// logShardStarts logs, for each shard pod of the new set, when its restore init
// container ran and when it became ready, relative to the old set's stop.
func logShardStarts(t *testing.T, r *fleetv1alpha1.ReshardStatus) {
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(sampleNS)); err != nil || r.StoppedAt == nil {
		t.Log(err)
		return
	}
	at := func(tm metav1.Time) string { return tm.Sub(r.StoppedAt.Time).Round(100 * time.Millisecond).String() }
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, "tallies-do-") {
			continue
		}
		line := p.Name + ": created " + at(p.CreationTimestamp)
		for _, cs := range p.Status.InitContainerStatuses {
			if st := cs.State.Terminated; st != nil {
				line += fmt.Sprintf(", %s %s–%s", cs.Name, at(st.StartedAt), at(st.FinishedAt))
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				line += ", ready " + at(c.LastTransitionTime)
			}
		}
		t.Log(line)
	}
}

// podLogLines logs the lines holding substr of the containers' logs of the pods whose
// names start with the prefixes.
func podLogLines(t *testing.T, substr string, prefixes ...string) {
	cs, err := kubernetes.NewForConfig(cluster.RestConfig())
	if err != nil {
		t.Log(err)
		return
	}
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(sampleNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Log(err)
		return
	}
	for _, p := range pods.Items {
		for _, pre := range prefixes {
			if !strings.HasPrefix(p.Name, pre) {
				continue
			}
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				b, _ := cs.CoreV1().Pods(sampleNS).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
				for _, line := range strings.Split(string(b), "\n") {
					if strings.Contains(line, substr) {
						t.Logf("%s/%s: %.1500s", p.Name, c.Name, line)
					}
				}
			}
		}
	}
}
