package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/kubectl/pkg/drain"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

const (
	tallyShards = 3
	tallyDONS   = "tallies"
)

// TestDrainAndNodeLoss (docs/scaling.md, "Drains and lost nodes"): two more
// nodes join the cluster. A namespace's three shards land on three nodes by default.
// While a client increments counters of 1,000 Durable Objects at 25 calls/s, `kubectl
// drain` of a node holding a shard moves it with no failed call and every counter
// exact; then a node holding a shard is killed outright: the shard comes back on
// another node from the backup, and the acknowledged writes lost are counted.
func TestDrainAndNodeLoss(t *testing.T) {
	requireNode(t)
	members := joinNodes(t, 2)
	url := applyTally(t, startBackupS3(t))
	shards := shardNodes(t)
	t.Logf("shards on nodes %v", shards)
	if distinct(shards) != tallyShards {
		t.Errorf("shards on nodes %v: want each on its own node (the default topology spread, docs/scaling.md)", shards)
	}
	drained := shardOn(t, shards, members[0].name)

	l := startTallyLoad(t, url)
	time.Sleep(5 * time.Second)
	took := drainNode(t, members[0].name, drained)
	time.Sleep(10 * time.Second)
	l.Stop()
	t.Logf("drain of %s: shard %d back on %s in %s; %d calls, %d failed", members[0].name, drained, shardNodes(t)[drained], took.Round(time.Second), l.Sent.Load(), l.Failed.Load())
	if l.Failed.Load() != 0 {
		t.Errorf("%d of %d calls failed during the drain:\n%s", l.Failed.Load(), l.Sent.Load(), strings.Join(l.Failures(30), "\n"))
		logTimeline(t, "tall")
		logPods(t, sampleNS, "tally")
	}
	checkExact(t, url, l)
	floor := lastCounts(l)
	uncordon(t, members[0].name)
	// The moved shard ships a full copy of every restored database first; until then its
	// newest writes lag that much (docs/scaling.md). The bound below is the caught-up one.
	waitShipped(t)

	lost := shardOn(t, shardNodes(t), members[1].name)
	l = startTallyLoad(t, url)
	// Longer than lostBound: a restore that lost more than the last seconds shows.
	time.Sleep(30 * time.Second)
	killed, took := loseNode(t, members[1])
	time.Sleep(10 * time.Second)
	l.Stop()
	writes, objects := lostWrites(t, url, l, killed)
	checkOneOwner(t, l)
	checkFloor(t, url, floor)
	fmt.Printf("realnode: node %s killed: shard %d back on %s in %s; %d calls, %d failed, %d acknowledged writes lost on %d objects\n",
		members[1].name, lost, shardNodes(t)[lost], took.Round(time.Second), l.Sent.Load(), l.Failed.Load(), writes, objects)
	for i, n := range shardNodes(t) {
		if n == members[1].name || n == "" {
			t.Errorf("shard %d on %q after the loss of %s", i, n, members[1].name)
		}
	}
}

// joinNodes joins n nodes; at the test's end it removes the test's objects' pods from
// them (a drain), stops them and deletes their Nodes.
func joinNodes(t *testing.T, count int) []*member {
	t.Helper()
	ctx := context.Background()
	var ms []*member
	for i := 1; i <= count; i++ {
		m, err := cluster.join(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		t.Cleanup(func() {
			m.stop()
			if err := cluster.client.CoreV1().Nodes().Delete(ctx, m.name, metav1.DeleteOptions{}); err != nil {
				t.Logf("delete node %s: %v", m.name, err)
			}
		})
	}
	return ms
}

// startBackupS3 runs versitygw on the control-plane host's address (pods on every
// node reach it) with a bucket, and returns spec.backup with the credentials Secret.
func startBackupS3(t *testing.T) map[string]any {
	t.Helper()
	s3 := testenv.StartS3On(t, net.JoinHostPort(nodeIP, "7070"), "backups")
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "tallies-backup"},
		StringData: map[string]string{fleetv1alpha1.R2AccessKeyIDKey: s3.AccessKeyID, fleetv1alpha1.R2SecretAccessKeyKey: s3.SecretAccessKey}}
	if _, err := cluster.client.CoreV1().Secrets(sampleNS).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.client.CoreV1().Secrets(sampleNS).Delete(context.Background(), sec.Name, metav1.DeleteOptions{})
	})
	return map[string]any{"s3": map[string]any{"endpoint": s3.Endpoint, "bucket": "backups",
		"credentialsSecret": map[string]any{"name": sec.Name}}}
}

// applyTally applies the Worker tally (three replicas) and its namespace of tallyShards
// shards with backup, and returns the Worker's URL once both are Ready.
func applyTally(t *testing.T, backup map[string]any) string {
	t.Helper()
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleetGroup + "/v1alpha1", "kind": "DurableObjectNamespace",
		"metadata": map[string]any{"name": tallyDONS, "namespace": sampleNS},
		"spec": map[string]any{"workerRef": map[string]any{"name": "tally"}, "className": "Tally", "sql": true,
			"shards": int64(tallyShards), "storage": map[string]any{"reclaimPolicy": "Delete"}, "backup": backup},
	}}
	removeAtEnd(t, []*unstructured.Unstructured{d})
	if err := cluster.apply(context.Background(), []*unstructured.Unstructured{d}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Every call waiting for a moving shard is held by a Worker pod: at 25/s through a
	// shard away ~55 s, the one pod left of two (the drain evicts the other) held
	// ~1,300 of them and was OOM-killed at its 192 MiB, the most the "paid" profile
	// allows. Three replicas, one per node, leave two to share them (docs/scaling.md,
	// "Drains and lost nodes").
	url := applyWorker(t, "tally", map[string]any{"replicas": int64(3),
		"source":   map[string]any{"inline": map[string]any{"modules": []any{map[string]any{"name": "worker.js", "type": "ESModule", "content": testenv.TallyModule}}}},
		"bindings": []any{map[string]any{"name": "TALLY", "durableObjectNamespace": map[string]any{"name": tallyDONS}}}})
	if err := cluster.waitReady(context.Background(), []*unstructured.Unstructured{d}, 5*time.Minute); err != nil {
		logPods(t, sampleNS, tallyDONS)
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "warm-up", func() error { _, err := get(url + "/inc?o=warm"); return err })
	return url
}

// shardNodes is the node of each shard pod, by ordinal ("" while unscheduled).
func shardNodes(t *testing.T) []string {
	t.Helper()
	out := make([]string, tallyShards)
	for i := range out {
		p, err := cluster.client.CoreV1().Pods(sampleNS).Get(context.Background(), fmt.Sprintf("%s-%d", render.ShardSetName(tallyDONS), i), metav1.GetOptions{})
		if err == nil {
			out[i] = p.Spec.NodeName
		}
	}
	return out
}

func distinct(xs []string) int {
	seen := map[string]bool{}
	for _, x := range xs {
		if x != "" {
			seen[x] = true
		}
	}
	return len(seen)
}

// shardOn is the shard on node (the test needs one there).
func shardOn(t *testing.T, shards []string, node string) int {
	t.Helper()
	for i, n := range shards {
		if n == node {
			return i
		}
	}
	t.Fatalf("no shard on node %s (shards on %v)", node, shards)
	return -1
}

func drainHelper(out io.Writer) *drain.Helper {
	return &drain.Helper{Ctx: context.Background(), Client: cluster.client, GracePeriodSeconds: -1,
		IgnoreAllDaemonSets: true, DeleteEmptyDirData: true, Timeout: 3 * time.Minute, Out: out, ErrOut: out}
}

// drainNode does what `kubectl drain` does (its own library): cordon, then evict every
// pod through the eviction API, respecting PodDisruptionBudgets. It returns how long
// until shard is Ready again, elsewhere.
func drainNode(t *testing.T, name string, shard int) time.Duration {
	t.Helper()
	start := time.Now()
	h := drainHelper(testWriter{t})
	nd, err := cluster.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := drain.RunCordonOrUncordon(h, nd, true); err != nil {
		t.Fatal(err)
	}
	if err := drain.RunNodeDrain(h, name); err != nil {
		t.Fatalf("drain %s: %v", name, err)
	}
	waitShardReady(t, shard, name, 3*time.Minute)
	return time.Since(start)
}

func uncordon(t *testing.T, name string) {
	t.Helper()
	nd, err := cluster.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err == nil {
		err = drain.RunCordonOrUncordon(drainHelper(testWriter{t}), nd, false)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// loseNode kills m outright, then does what an administrator does for a node that will
// not come back (https://kubernetes.io/docs/concepts/cluster-administration/node-shutdown/#non-graceful-node-shutdown):
// once the Node is NotReady, the out-of-service taint. It returns how long until every
// shard it held is Ready again, elsewhere.
func loseNode(t *testing.T, m *member) (killed time.Time, took time.Duration) {
	t.Helper()
	ctx := context.Background()
	var held []int
	for i, n := range shardNodes(t) {
		if n == m.name {
			held = append(held, i)
		}
	}
	start := time.Now()
	m.kill()
	eventually(t, 3*time.Minute, "node "+m.name+" NotReady", func() error {
		if err := nodeReady(ctx, cluster.client, m.name); err == nil {
			return fmt.Errorf("still Ready")
		}
		return nil
	})
	t.Logf("node %s NotReady after %s; tainting it out-of-service", m.name, time.Since(start).Round(time.Second))
	nd, err := cluster.client.CoreV1().Nodes().Get(ctx, m.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nd.Spec.Taints = append(nd.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	if _, err := cluster.client.CoreV1().Nodes().Update(ctx, nd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, shard := range held {
		waitShardReady(t, shard, m.name, 4*time.Minute)
	}
	return start, time.Since(start)
}

// waitShardReady waits until shard's pod is Ready on a node other than from.
func waitShardReady(t *testing.T, shard int, from string, timeout time.Duration) {
	t.Helper()
	name := fmt.Sprintf("%s-%d", render.ShardSetName(tallyDONS), shard)
	deadline := time.Now().Add(timeout)
	for {
		p, err := cluster.client.CoreV1().Pods(sampleNS).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.Spec.NodeName != "" && p.Spec.NodeName != from && p.DeletionTimestamp == nil && common.PodReady(p) {
			return
		}
		if time.Now().After(deadline) {
			logPods(t, sampleNS, tallyDONS)
			logTimeline(t, tallyDONS)
			t.Fatalf("shard %d not Ready on a node other than %s after %s", shard, from, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// startTallyLoad increments counters of 1,000 objects at 25 calls/s until stopped, at
// the test's end at the latest.
func startTallyLoad(t *testing.T, url string) *testenv.TallyLoad {
	l := testenv.StartTallyLoad(url, 25, 1000, nil)
	t.Cleanup(l.Stop)
	return l
}

// counter reads object o's counter.
//
// A read is tried 3 times: after a node loss, a connection may still be routed to the
// lost node's Worker pod until its endpoint is gone, and a read that never arrived says
// nothing about the object's state (the calls of the load are what count failures).
func counter(url string, o int) (int, error) {
	var (
		n   int
		err error
	)
	for try := 0; try < 3; try++ {
		var body string
		if body, err = get(fmt.Sprintf("%s/get?o=%d", url, o)); err == nil {
			return n, json.Unmarshal([]byte(body), &n)
		}
		time.Sleep(2 * time.Second)
	}
	return n, err
}

// checkExact: each object's acknowledged increments are its last counts, once each,
// from instances that never interleave (two live copies of an object would), and its
// counter ends at the last of them.
func checkExact(t *testing.T, url string, l *testenv.TallyLoad) {
	t.Helper()
	for o, as := range l.Answers() {
		sort.Slice(as, func(i, j int) bool { return as[i].N < as[j].N })
		for i, a := range as {
			if a.N != as[0].N+i {
				t.Errorf("object o%d: acknowledged counts not consecutive at %d (%+v)", o, a.N, as)
				break
			}
		}
		if a := testenv.AnsweredAgain(as); a != nil {
			t.Errorf("object o%d: instance %s answered again after a later one (n=%d): two copies served it", o, a.Token, a.N)
		}
		if n, err := counter(url, o); err != nil || n != as[len(as)-1].N {
			t.Errorf("object o%d: counter %d (%v) at the end, want %d (its last acknowledged increment)", o, n, err, as[len(as)-1].N)
		}
	}
}

// lostBound: a write the backup may lose with a node was acknowledged at most this
// long before the node went. The sidecar ships every second (docs/backup.md, "What is
// lost"); the rest is the pass's uploads under this test's load on a shared machine.
const lostBound = 10 * time.Second

// lostWrites counts the acknowledged increments an object's counter no longer holds
// (after a node was lost at killed), and on how many objects, and fails the test for
// one acknowledged earlier than lostBound before the loss: the restore lost more than
// the backup's last moments. An object restored to an older state hands out counts
// again: its answers by the instance(s) before the first one that answered after the
// loss are lost above the count that instance started from (or above the final
// counter when none answered since). A failed call the object applied makes a count no
// one acknowledged: skipped, not lost.
func lostWrites(t *testing.T, url string, l *testenv.TallyLoad, killed time.Time) (writes, objects int) {
	t.Helper()
	for o, as := range l.Answers() {
		c, err := counter(url, o)
		if err != nil {
			t.Errorf("object o%d: %v", o, err)
			continue
		}
		sort.Slice(as, func(i, j int) bool { return as[i].At.Before(as[j].At) })
		base, after := c, ""
		for _, a := range as {
			if a.At.After(killed) && a.Token != as[0].Token {
				after = a.Token
				break
			}
		}
		for _, a := range as { // calls held through the loss arrive in any order
			if a.Token == after && a.N-1 < base {
				base = a.N - 1
			}
		}
		lost := 0
		for _, a := range as {
			if a.Token == after {
				break
			}
			if a.N > base {
				lost++
				if a.At.Before(killed.Add(-lostBound)) {
					t.Errorf("object o%d: count %d acknowledged at %s, %s before the node was lost, is not in the restored state (restored to %d)",
						o, a.N, a.At.Format("15:04:05.000"), killed.Sub(a.At).Round(time.Millisecond), base)
				}
			}
		}
		if lost > 0 {
			writes += lost
			objects++
		}
	}
	return writes, objects
}

// waitShipped waits until status.backup lists every shard as shipped: each completed
// a pass since it started.
func waitShipped(t *testing.T) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.rest)
	if err != nil {
		t.Fatal(err)
	}
	res := dyn.Resource(schema.GroupVersionResource{Group: fleetGroup, Version: "v1alpha1", Resource: "durableobjectnamespaces"}).Namespace(sampleNS)
	eventually(t, 4*time.Minute, "every shard shipped", func() error {
		d, err := res.Get(context.Background(), tallyDONS, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods, _, _ := unstructured.NestedStringSlice(d.Object, "status", "backup", "shippedPods")
		if len(pods) < tallyShards {
			return fmt.Errorf("shipped %v", pods)
		}
		return nil
	})
}

// lastCounts is each object's last acknowledged count.
func lastCounts(l *testenv.TallyLoad) map[int]int {
	out := map[int]int{}
	for o, as := range l.Answers() {
		for _, a := range as {
			out[o] = max(out[o], a.N)
		}
	}
	return out
}

// checkFloor: no object's counter ends below floor, the counts checked exact after the
// drain, long shipped when the node was lost.
func checkFloor(t *testing.T, url string, floor map[int]int) {
	t.Helper()
	for o, n := range floor {
		if c, err := counter(url, o); err != nil || c < n {
			t.Errorf("object o%d: counter %d (%v) after the loss, below %d, its count before it (shipped long before)", o, c, err, n)
		}
	}
}

// checkOneOwner: in the order answers arrived, no object's instance answers again after
// a later one did (two live copies would interleave).
func checkOneOwner(t *testing.T, l *testenv.TallyLoad) {
	t.Helper()
	for o, as := range l.Answers() {
		sort.Slice(as, func(i, j int) bool { return as[i].At.Before(as[j].At) })
		if a := testenv.AnsweredAgain(as); a != nil {
			t.Errorf("object o%d: instance %s answered again (n=%d at %s) after a later one: two copies served it", o, a.Token, a.N, a.At.Format("15:04:05.000"))
		}
	}
}

// logTimeline logs, in time order, the Events on the objects whose names start with
// prefix (pods, claims, the StatefulSet, the operator's decisions).
func logTimeline(t *testing.T, prefix string) {
	evs, err := cluster.client.CoreV1().Events(sampleNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("events: %v", err)
		return
	}
	items := evs.Items
	sort.Slice(items, func(i, j int) bool { return eventTime(items[i]).Before(eventTime(items[j])) })
	for _, e := range items {
		if strings.HasPrefix(e.InvolvedObject.Name, prefix) {
			t.Logf("%s %s/%s %s %s: %s", eventTime(e).Format("15:04:05.000"), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
		}
	}
}

func eventTime(e corev1.Event) time.Time {
	for _, at := range []time.Time{e.EventTime.Time, e.LastTimestamp.Time, e.FirstTimestamp.Time} {
		if !at.IsZero() {
			return at
		}
	}
	return e.CreationTimestamp.Time
}
