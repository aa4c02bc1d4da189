package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// stashModule writes to a KVNamespace, a D1Database and a Queue it also consumes (its
// queue() handler records each delivery in D1), and checks what is there.
const stashModule = `export default {
  async fetch(req, env) {
    const u = new URL(req.url), k = u.searchParams.get("k");
    switch (u.pathname) {
      case "/put": await env.KV.put(k, "v-" + k); return new Response("ok");
      case "/insert": await env.DB.prepare("INSERT INTO items (v) VALUES (?)").bind(k).run(); return new Response("ok");
      case "/send": await env.Q.send({ k }); return new Response("ok");
      case "/too-big": {
        // An oversized text message, or a batch of three 100,000-byte messages.
        const n = Number(u.searchParams.get("n"));
        try {
          if (u.searchParams.has("batch")) await env.Q.sendBatch([1, 2, 3].map(() => ({ body: "x".repeat(n), contentType: "text" })));
          else await env.Q.send("x".repeat(n), { contentType: "text" });
          return new Response("sent");
        } catch (e) { return new Response(String(e.message)); }
      }
      case "/check": {
        const from = Number(u.searchParams.get("from")), to = Number(u.searchParams.get("to"));
        const kv = [];
        for (let i = from; i < to; i += 100) {
          const keys = Array.from({ length: Math.min(100, to - i) }, (_, j) => "k" + (i + j));
          for (const [key, v] of await env.KV.get(keys)) if (v === "v-" + key) kv.push(key);
        }
        const items = (await env.DB.prepare("SELECT v FROM items").raw()).map((r) => r[0]);
        const delivered = (await env.DB.prepare("SELECT DISTINCT k FROM delivered WHERE queue = 'stash-q'").raw()).map((r) => r[0]);
        const redelivered = await env.DB.prepare("SELECT count(*) - count(DISTINCT id) AS n FROM delivered WHERE queue = 'stash-q'").first("n");
        return Response.json({ kv, items, delivered, redelivered });
      }
      case "/deliveries": {
        // Every delivery of the messages sent after the kills, and every dead letter.
        const q = "SELECT k, id, attempts, queue FROM delivered WHERE k NOT GLOB 'k[0-9]*' OR queue != 'stash-q' ORDER BY k, attempts";
        return Response.json((await env.DB.prepare(q).all()).results);
      }
    }
    return new Response("no such path", { status: 404 });
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      await env.DB.prepare("INSERT INTO delivered (k, id, attempts, queue) VALUES (?, ?, ?, ?)")
        .bind(m.body.k, m.id, m.attempts, batch.queue).run();
      if (m.body.k.startsWith("poison") && batch.queue === "stash-q") m.retry();
      else m.ack();
    }
  },
};`

// newStash creates the Worker "stash" (3 replicas) and its stores: KVNamespace
// stash-kv, D1Database stash-db (migrations from a ConfigMap) and Queue stash-q
// consumed by stash itself.
func newStash(t *testing.T) []client.Object {
	t.Helper()
	ref := func(n string) *fleetv1alpha1.LocalObjectReference {
		return &fleetv1alpha1.LocalObjectReference{Name: n}
	}
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "stash-migrations"}, Data: map[string]string{
			"0001_items.sql":     "CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT NOT NULL);",
			"0002_delivered.sql": "CREATE TABLE delivered (k TEXT NOT NULL, id TEXT NOT NULL, attempts INTEGER NOT NULL, queue TEXT NOT NULL);",
		}},
		&fleetv1alpha1.KVNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "stash-kv"}},
		&fleetv1alpha1.D1Database{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "stash-db"},
			Spec: fleetv1alpha1.D1DatabaseSpec{Migrations: &fleetv1alpha1.D1Migrations{ConfigMap: *ref("stash-migrations")}}},
		&fleetv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "stash-q"},
			// The consumer writes to D1: while the D1 host is being restarted its batches
			// fail and are retried; 30 retries a second apart outlast that (with the
			// default 3 and no delay, such messages would go to the dead letter queue).
			Spec: fleetv1alpha1.QueueSpec{Consumers: []fleetv1alpha1.QueueConsumer{{Worker: "stash", MaxBatchTimeout: ptr.To[int32](0),
				MaxRetries: ptr.To[int32](stashMaxRetries), RetryDelay: ptr.To[int32](1), DeadLetterQueue: "stash-dlq"}}}},
		// Its dead letters are delivered to the same Worker (docs/queues.md).
		&fleetv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "stash-dlq"},
			Spec: fleetv1alpha1.QueueSpec{Consumers: []fleetv1alpha1.QueueConsumer{{Worker: "stash", MaxBatchTimeout: ptr.To[int32](0)}}}},
		&fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "stash"}, Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](3),
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(stashModule)}}}},
			Bindings: []fleetv1alpha1.Binding{{Name: "KV", KVNamespace: ref("stash-kv")}, {Name: "DB", D1Database: ref("stash-db")}, {Name: "Q", Queue: &fleetv1alpha1.QueueBinding{Name: "stash-q"}}},
		}},
	}
	for _, o := range objs {
		if err := k8sClient.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	for _, o := range objs[1:] {
		waitReady(t, o, 5*time.Minute)
	}
	return objs
}

// killContainer SIGKILLs the process of container in the first pod matching labels in
// namespace ns (kill -9 of that pod's process; the kubelet restarts it).
func killContainer(t *testing.T, ns string, labels map[string]string, container string) string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, pp := range cluster.PodProcesses(p.Namespace, p.Name) {
			if pp.Container == container {
				if err := syscall.Kill(pp.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				return p.Name
			}
		}
	}
	t.Fatalf("no running %s container among pods %v", container, labels)
	return ""
}

// ack calls url until it answers 200 "ok" (the write was acknowledged) or a minute
// passes; it reports whether the write was acknowledged.
func ack(hc *http.Client, url string) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if body, err := getWith(hc, url); err == nil && body == "ok" {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}

var (
	dataWrites = flag.Int("data-writes", 60, "TestDataStoresSurviveKills: KV puts, D1 inserts and queue sends (each)")
	dataKills  = flag.Int("data-kills", 5, "TestDataStoresSurviveKills: SIGKILLs, spread over the writes, rotating over the targets")
)

// dataKillTargets are what TestDataStoresSurviveKills kills, in turn: the workerd of
// the KV, D1 and Queue hosts, of a Worker pod, and the manager.
var dataKillTargets = []struct {
	ns        func() string
	labels    map[string]string
	container string
}{
	{func() string { return sampleNS }, map[string]string{podcontract.LabelKVNamespace: "stash-kv"}, podcontract.WorkerdContainer},
	{func() string { return sampleNS }, map[string]string{podcontract.LabelD1Database: "stash-db"}, podcontract.WorkerdContainer},
	{func() string { return sampleNS }, map[string]string{podcontract.LabelQueue: "stash-q"}, podcontract.WorkerdContainer},
	{func() string { return sampleNS }, map[string]string{podcontract.LabelWorker: "stash", podcontract.LabelComponent: podcontract.ComponentWorker}, podcontract.WorkerdContainer},
	{func() string { return managerNS }, podcontract.ManagerPodLabels(), "manager"},
}

// TestDataStoresSurviveKills: KV puts, D1 inserts and queue sends (-data-writes each,
// 4 writers through the Worker's 3 pods) while the KV, D1 and Queue hosts, a Worker pod
// and the manager are SIGKILLed in turn (-data-kills in all): every acknowledged write
// is there afterwards and every acknowledged message is delivered to the consumer. The
// issue's scale: -data-writes 10000 -data-kills 20.
func TestDataStoresSurviveKills(t *testing.T) {
	newStash(t)
	waitWorkerReady(t, "stash")
	url := serviceURL(t, "stash")
	hc := &http.Client{Timeout: 30 * time.Second}
	// Oversized sends through the pods get Cloudflare's limits (128 KB a message, 256 KB a
	// batch: https://developers.cloudflare.com/queues/platform/limits/) and, at this
	// compatibility date, its error codes in the message
	// (https://developers.cloudflare.com/queues/reference/error-codes/), as docs/queues.md says.
	for q, want := range map[string]string{"n=1048576": "Message size out of bounds (10204)", "n=128001": "Message size out of bounds (10204)",
		"n=100000&batch=1": "Batch size out of bounds (10205)"} {
		eventually(t, time.Minute, "oversized send "+q, func() error {
			got, err := getWith(hc, url+"/too-big?"+q)
			if err == nil && got != want {
				err = fmt.Errorf("%s: %q, want %q", q, got, want)
			}
			return err
		})
	}
	n, kills := *dataWrites, *dataKills
	next := make(chan int)
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				k := fmt.Sprintf("k%d", i)
				if ack(hc, url+"/put?k="+k) && ack(hc, url+"/insert?k="+k) && ack(hc, url+"/send?k="+k) {
					mu.Lock()
					acked = append(acked, k)
					mu.Unlock()
				}
			}
		}()
	}
	killed := 0
	for i := 0; i < n; i++ {
		if killed < kills && i == (killed+1)*n/(kills+1) {
			tg := dataKillTargets[killed%len(dataKillTargets)]
			t.Logf("write %d: killed %s", i, killContainer(t, tg.ns(), tg.labels, tg.container))
			killed++
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if len(acked) < n*9/10 {
		t.Fatalf("only %d of %d writes acknowledged", len(acked), n)
	}
	t.Logf("%d of %d writes acknowledged across %d kills", len(acked), n, killed)
	eventually(t, 3*time.Minute, "every acknowledged write present and every message delivered", func() error {
		body, err := getWith(hc, fmt.Sprintf("%s/check?from=0&to=%d", url, n))
		if err != nil {
			return err
		}
		var got struct {
			KV, Items, Delivered []string
			Redelivered          int
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			return fmt.Errorf("%v: %.300s", err, body)
		}
		for what, have := range map[string][]string{"KV": got.KV, "D1": got.Items, "delivered": got.Delivered} {
			if missing := missingFrom(acked, have); len(missing) > 0 {
				return fmt.Errorf("%s: %d acknowledged but missing, e.g. %v", what, len(missing), missing[:min(5, len(missing))])
			}
		}
		// At-least-once: a message whose ack a killed host had not committed comes again.
		t.Logf("every acknowledged write present, every message delivered; %d deliveries were repeats", got.Redelivered)
		return nil
	})
	checkQueueDelivery(t, hc, url)
	db := &fleetv1alpha1.D1Database{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: "stash-db"}, db); err != nil {
		t.Fatal(err)
	}
	if db.Status.LastMigration != "0002_delivered.sql" {
		t.Errorf("status.lastMigration = %q, want 0002_delivered.sql", db.Status.LastMigration)
	}
	// Leave the manager serving for the next test: its webhooks answer again.
	eventually(t, 2*time.Minute, "the manager's webhooks answer", func() error {
		w := &fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "stash-probe"}, Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(module("probe"))}}}},
		}}
		return k8sClient.Create(context.Background(), w, client.DryRunAll)
	})
}

// stashMaxRetries is the stash-q consumer's maxRetries.
const stashMaxRetries = 30

// delivery is a row of the stash Worker's delivered table.
type delivery struct {
	K, ID    string
	Attempts int
	Queue    string
}

// checkQueueDelivery sends, with every store up, 10 messages and one ("poison") that
// the consumer always retries. Each of the 10 is delivered and acked exactly once (one
// delivery, attempts 1); poison is delivered maxRetries+1 times (attempts 1 to
// maxRetries+1), then once to the dead letter queue (attempts 1); no other message,
// none of the kill phase's either, reached the dead letter queue.
// https://developers.cloudflare.com/queues/configuration/batching-retries/
// https://developers.cloudflare.com/queues/configuration/dead-letter-queues/
func checkQueueDelivery(t *testing.T, hc *http.Client, url string) {
	t.Helper()
	var want []string
	for i := 0; i < 10; i++ {
		want = append(want, fmt.Sprintf("q%d,1,stash-q", i))
	}
	for _, k := range append(want, "poison,1,stash-q") {
		if k := strings.Split(k, ",")[0]; !ack(hc, url+"/send?k="+k) {
			t.Fatalf("send %s not acknowledged", k)
		}
	}
	for a := 1; a <= stashMaxRetries+1; a++ {
		want = append(want, fmt.Sprintf("poison,%d,stash-q", a))
	}
	want = append(want, "poison,1,stash-dlq")
	var got []string
	eventually(t, 3*time.Minute, "poison in the dead letter queue", func() error {
		got = nil
		body, err := getWith(hc, url+"/deliveries")
		var ds []delivery
		if err == nil {
			err = json.Unmarshal([]byte(body), &ds)
		}
		if err != nil {
			return fmt.Errorf("%v: %.300s", err, body)
		}
		dead := false
		for _, d := range ds {
			got = append(got, fmt.Sprintf("%s,%d,%s", d.K, d.Attempts, d.Queue))
			dead = dead || d.Queue == "stash-dlq"
		}
		if !dead {
			return fmt.Errorf("no dead letter yet; %d deliveries", len(ds))
		}
		return nil
	})
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("deliveries (key,attempts,queue):\n got %v\nwant %v", got, want)
	}
}

func missingFrom(want, have []string) []string {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	var out []string
	for _, w := range want {
		if !set[w] {
			out = append(out, w)
		}
	}
	sort.Strings(out)
	return out
}

// TestD1Template: ../shared/testdata/cloudflare-templates/d1-template, unchanged, by
// `workerd-operator deploy` (its predeploy `wrangler d1 migrations apply DB --remote` is
// skipped): its D1Database applies migrations/0001_create_comments_table.sql and the
// page shows the seeded comments.
func TestD1Template(t *testing.T) {
	d := deployShared(t, "d1-template")
	db := d.res.Import.D1Databases[0]
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	if db.Status.LastMigration != "0001_create_comments_table.sql" {
		t.Errorf("status.lastMigration = %q", db.Status.LastMigration)
	}
	url := d.url
	eventually(t, time.Minute, "the page lists the seeded comments", func() error {
		body, err := get(url)
		if err != nil {
			return err
		}
		for _, want := range []string{"Kristian", "Congrats!", "Serena", "Keep up the good work!"} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("page lacks %q: %.300s", want, body)
			}
		}
		return nil
	})
	if set := render.DataSetName(render.DataD1, db.Name); set != "d1-template-database-d1" {
		t.Errorf("host set %s", set)
	}
	runTemplateSpec(t, "d1-template", d.url)
}
