package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// ledgerModule writes each operation (idempotently: a write retried after a partial
// failure adds nothing twice) to a Durable Object (one of 16, on 2 shards), a KV
// namespace, a D1 database and a queue it consumes itself (recording deliveries in D1),
// and lists what each store holds.
const ledgerModule = `import { DurableObject, WorkflowEntrypoint } from "cloudflare:workers";
export class Flow extends WorkflowEntrypoint {
  async run(event, step) {
    const k = event.payload.k;
    // Counts its runs in KV: a step committed before the loss must not run again.
    const a = await step.do("first", async () => {
      const runs = Number((await this.env.KV.get("runs-" + k)) ?? 0) + 1;
      await this.env.KV.put("runs-" + k, String(runs));
      return "a-" + k;
    });
    const paid = await step.waitForEvent("paid", { type: "pay", timeout: "1 hour" });
    return { a, b: "b-" + paid.payload.n, runs: Number(await this.env.KV.get("runs-" + k)) };
  }
}
export class Tally extends DurableObject {
  add(k) {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS ops (k TEXT PRIMARY KEY)");
    this.ctx.storage.sql.exec("INSERT OR IGNORE INTO ops VALUES (?)", k);
  }
  ids() {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS ops (k TEXT PRIMARY KEY)");
    return this.ctx.storage.sql.exec("SELECT k FROM ops").toArray().map((r) => r.k);
  }
}
export default {
  async fetch(req, env) {
    const u = new URL(req.url), k = u.searchParams.get("k");
    if (u.pathname === "/write") {
      await env.TALLY.getByName("t" + (Number(k.slice(1)) % 16)).add(k);
      await env.KV.put(k, "v-" + k);
      await env.DB.prepare("INSERT OR IGNORE INTO items (v) VALUES (?)").bind(k).run();
      await env.Q.send({ k });
      return new Response("ok");
    }
    if (u.pathname === "/flow/start") {
      await env.FLOW.create({ id: k, params: { k } });
      return new Response("ok");
    }
    if (u.pathname === "/flow/pay") {
      await (await env.FLOW.get(k)).sendEvent({ type: "pay", payload: { n: u.searchParams.get("n") } });
      return new Response("ok");
    }
    if (u.pathname === "/flow/status") return Response.json(await (await env.FLOW.get(k)).status());
    if (u.pathname === "/state") {
      const tally = [];
      for (let i = 0; i < 16; i++) tally.push(...(await env.TALLY.getByName("t" + i).ids()));
      const kv = [];
      let cursor;
      do {
        const page = await env.KV.list({ cursor });
        kv.push(...page.keys.map((x) => x.name));
        cursor = page.list_complete ? undefined : page.cursor;
      } while (cursor);
      const items = (await env.DB.prepare("SELECT v FROM items").raw()).map((r) => r[0]);
      const delivered = (await env.DB.prepare("SELECT DISTINCT k FROM delivered").raw()).map((r) => r[0]);
      return Response.json({ tally, kv, items, delivered });
    }
    return new Response("no such path", { status: 404 });
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      await env.DB.prepare("INSERT INTO delivered (k) VALUES (?)").bind(m.body.k).run();
      m.ack();
    }
  },
};`

// backupS3 starts versitygw as a pod <name> (as config/dev/r2 does) with a bucket
// "backups" and the Secret <name>-credentials, and returns the bucket for spec.backup.
func backupS3(t *testing.T, name string) fleetv1alpha1.S3BucketSource {
	t.Helper()
	sc := &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	data := []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	labels := map[string]string{"app": name}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: name + "-credentials"},
			StringData: map[string]string{fleetv1alpha1.R2AccessKeyIDKey: "backup-access", fleetv1alpha1.R2SecretAccessKeyKey: "backup-secret-0123456789"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: name}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "bucket", Image: "docker.io/library/busybox:1.37",
					Args: []string{"mkdir", "-p", "/data/objects/backups", "/data/meta"}, VolumeMounts: data, SecurityContext: sc}},
				Containers: []corev1.Container{{Name: "versitygw", Image: "docker.io/versity/versitygw:v1.8.0",
					Args: []string{"--port", "$(POD_IP):7070", "--quiet", "posix", "--sidecar", "/data/meta", "/data/objects"},
					Env: []corev1.EnvVar{
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
						{Name: "ROOT_ACCESS_KEY_ID", Value: "backup-access"}, {Name: "ROOT_SECRET_ACCESS_KEY", Value: "backup-secret-0123456789"},
					},
					Ports:          []corev1.ContainerPort{{Name: "s3", ContainerPort: 7070}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(7070)}}, PeriodSeconds: 2},
					VolumeMounts:   data, SecurityContext: sc}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			}},
		}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: name}, Spec: corev1.ServiceSpec{
			Selector: labels, Ports: []corev1.ServicePort{{Name: "s3", Port: 7070, TargetPort: intstr.FromString("s3")}}}},
	}
	ctx := context.Background()
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	eventually(t, 3*time.Minute, name+" ready", func() error {
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 1 {
			return fmt.Errorf("%d ready replicas", d.Status.ReadyReplicas)
		}
		return nil
	})
	return fleetv1alpha1.S3BucketSource{Endpoint: "http://" + name + "." + sampleNS + ".svc.cluster.local:7070", Bucket: "backups",
		CredentialsSecret: fleetv1alpha1.LocalObjectReference{Name: name + "-credentials"}}
}

// newLedger creates the Worker "ledger" (3 replicas) and its stores, each with a backup
// on s3 and reclaimPolicy Delete: DurableObjectNamespace ledger-do (class Tally, 2
// shards), KVNamespace ledger-kv, D1Database ledger-db, Queue ledger-q consumed by
// ledger itself, and the Workflow ledger-flow (class Flow).
func newLedger(t *testing.T, s3 fleetv1alpha1.S3BucketSource) {
	t.Helper()
	bk := func() *fleetv1alpha1.BackupSpec { return &fleetv1alpha1.BackupSpec{S3: s3} }
	del := func() *fleetv1alpha1.StorageSpec {
		return &fleetv1alpha1.StorageSpec{ReclaimPolicy: fleetv1alpha1.ReclaimDelete}
	}
	ref := func(n string) *fleetv1alpha1.LocalObjectReference {
		return &fleetv1alpha1.LocalObjectReference{Name: n}
	}
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "ledger-migrations"}, Data: map[string]string{
			"0001_items.sql":     "CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE);",
			"0002_delivered.sql": "CREATE TABLE delivered (k TEXT NOT NULL);",
		}},
		&fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "ledger"}, Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](3),
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(ledgerModule)}}}},
			Bindings: []fleetv1alpha1.Binding{{Name: "TALLY", DurableObjectNamespace: ref("ledger-do")}, {Name: "KV", KVNamespace: ref("ledger-kv")},
				{Name: "DB", D1Database: ref("ledger-db")}, {Name: "Q", Queue: &fleetv1alpha1.QueueBinding{Name: "ledger-q"}}, {Name: "FLOW", Workflow: ref("ledger-flow")}},
		}},
		&fleetv1alpha1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "ledger-flow"},
			Spec: fleetv1alpha1.WorkflowSpec{WorkerRef: *ref("ledger"), ClassName: "Flow",
				Engine: &fleetv1alpha1.WorkflowEngineSpec{Storage: del(), Backup: bk()}}},
		&fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "ledger-do"},
			Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: *ref("ledger"), ClassName: "Tally", SQL: true, Shards: ptr.To[int32](2),
				Storage: del(), Backup: bk()}},
		&fleetv1alpha1.KVNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "ledger-kv"},
			Spec: fleetv1alpha1.KVNamespaceSpec{Storage: del(), Backup: bk()}},
		&fleetv1alpha1.D1Database{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "ledger-db"},
			Spec: fleetv1alpha1.D1DatabaseSpec{Storage: del(), Backup: bk(), Migrations: &fleetv1alpha1.D1Migrations{ConfigMap: *ref("ledger-migrations")}}},
		&fleetv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "ledger-q"},
			Spec: fleetv1alpha1.QueueSpec{Storage: del(), Backup: bk(), Consumers: []fleetv1alpha1.QueueConsumer{{Worker: "ledger",
				MaxBatchTimeout: ptr.To[int32](0), MaxRetries: ptr.To[int32](30), RetryDelay: ptr.To[int32](1)}}}},
	}
	for _, o := range objs {
		if err := k8sClient.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	for _, o := range objs[2:] {
		waitReady(t, o, 5*time.Minute)
	}
	waitWorkerReady(t, "ledger")
}

// loseVolume deletes pod's claim "data-<pod>" and then the pod without a grace period:
// the volume and everything the pod had not shipped are gone, as with a lost disk.
func loseVolume(t *testing.T, pod string) types.UID {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: pod}, p); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "data-" + pod}}
	if err := k8sClient.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	return p.UID
}

// replacementStarted is when the first container of pod's replacement (a pod of that
// name other than uid) started, rounded up to the second the API gives. A node stops
// the processes of a force-deleted pod only after its grace period (preStop included:
// "Pod termination", https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination-forced),
// and its replacement starts once they stopped; until then the old processes keep
// acknowledging writes to a volume the test counts as lost, which a lost disk would
// have failed.
func replacementStarted(t *testing.T, pod string, uid types.UID) time.Time {
	t.Helper()
	p := &corev1.Pod{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: pod}, p); err != nil {
		t.Fatal(err)
	}
	if p.UID == uid {
		t.Fatalf("pod %s was not replaced", pod)
	}
	var first time.Time
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		at := metav1.Time{}
		switch {
		case s.State.Running != nil:
			at = s.State.Running.StartedAt
		case s.State.Terminated != nil:
			at = s.State.Terminated.StartedAt
		}
		if !at.IsZero() && (first.IsZero() || at.Before(&metav1.Time{Time: first})) {
			first = at.Time
		}
	}
	if first.IsZero() {
		t.Fatalf("pod %s: no container of the replacement has started", pod)
	}
	return first.Add(time.Second)
}

// ledgerState is what /state answers.
type ledgerState struct {
	Tally, KV, Items, Delivered []string
}

// backupRPO bounds, on the loaded 2-core test machine, how long an acknowledged write
// may wait to reach the bucket (docs/backup.md: a pass every second plus its upload).
const backupRPO = 3 * time.Second

// lostPods are the pods TestBackupSurvivesDiskLoss deletes with their claims, by the
// stores of the ledger's /state each one holds (queue deliveries are recorded in D1).
var lostPods = map[string][]string{
	"Durable Objects":  {"ledger-do-do-0"},
	"KV":               {"ledger-kv-kv-0"},
	"D1":               {"ledger-db-d1-0"},
	"queue deliveries": {"ledger-q-queue-0", "ledger-db-d1-0"},
}

// TestBackupSurvivesDiskLoss is Done means 1 and 4 of issue 33: Worker pods write each
// operation to Durable Objects on 2 shards, a KV namespace, a D1 database and a queue at
// a steady rate, and three workflow instances wait for an event; shard sidecars, the S3
// server and the manager are SIGKILLed during the load; then shard 0's, every data
// host's and the workflow engine's claim and pod are deleted mid-load; the pods come
// back restored from the bucket. Every write acknowledged more than
// backupRPO before the loss is in every store, the writes lost inside that window are
// counted and reported, nothing is there twice.
func TestBackupSurvivesDiskLoss(t *testing.T) {
	newLedger(t, backupS3(t, "backup-s3"))
	url := serviceURL(t, "ledger")
	hc := &http.Client{Timeout: 30 * time.Second}
	var mu sync.Mutex
	acked := map[string]time.Time{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	next := 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				mu.Lock()
				k := fmt.Sprintf("k%d", next)
				next++
				mu.Unlock()
				if ack(hc, url+"/write?k="+k) {
					mu.Lock()
					acked[k] = time.Now()
					mu.Unlock()
				}
			}
		}()
	}
	flows := []string{"f1", "f2", "f3"}
	for _, k := range flows {
		if !ack(hc, url+"/flow/start?k="+k) {
			t.Fatalf("workflow instance %s not created", k)
		}
	}
	// Done means 4: the sidecars shipping, the S3 server and the manager are killed
	// (SIGKILL) during the load; the backup has no gap (checked after the loss).
	for _, kill := range []struct {
		labels    map[string]string
		container string
		ns        string
	}{
		{map[string]string{podcontract.LabelDONS: "ledger-do"}, podcontract.SidecarContainer, sampleNS},
		{map[string]string{"app": "backup-s3"}, "versitygw", sampleNS},
		{podcontract.ManagerPodLabels(), "manager", managerNS},
		{map[string]string{podcontract.LabelD1Database: "ledger-db"}, podcontract.SidecarContainer, sampleNS},
	} {
		time.Sleep(3 * time.Second)
		t.Logf("killed %s of %s", kill.container, killContainer(t, kill.ns, kill.labels, kill.container))
	}
	for _, k := range flows {
		waitFlow(t, hc, url, k, "waiting")
	}
	time.Sleep(3 * time.Second)
	lost := time.Now()
	lostUIDs := map[string]types.UID{}
	for _, pod := range []string{"ledger-do-do-0", "ledger-kv-kv-0", "ledger-db-d1-0", "ledger-q-queue-0", "ledger-flow-wf-0"} {
		lostUIDs[pod] = loseVolume(t, pod)
	}
	t.Logf("claims and pods deleted at %s", lost.Format(time.RFC3339Nano))
	time.Sleep(15 * time.Second)
	close(stop)
	wg.Wait()
	for _, o := range []client.Object{&fleetv1alpha1.DurableObjectNamespace{}, &fleetv1alpha1.KVNamespace{}, &fleetv1alpha1.D1Database{}, &fleetv1alpha1.Queue{}, &fleetv1alpha1.Workflow{}} {
		name := map[string]string{"*v1alpha1.DurableObjectNamespace": "ledger-do", "*v1alpha1.KVNamespace": "ledger-kv",
			"*v1alpha1.D1Database": "ledger-db", "*v1alpha1.Queue": "ledger-q", "*v1alpha1.Workflow": "ledger-flow"}[fmt.Sprintf("%T", o)]
		o.SetNamespace(sampleNS)
		o.SetName(name)
		waitReady(t, o, 5*time.Minute)
	}
	ends := map[string]time.Time{}
	for what, pods := range lostPods {
		for _, pod := range pods {
			if at := replacementStarted(t, pod, lostUIDs[pod]); at.After(ends[what]) {
				ends[what] = at
			}
		}
	}
	var st ledgerState
	eventually(t, 3*time.Minute, "every acknowledged write delivered", func() error {
		body, err := getWith(hc, url+"/state")
		if err == nil {
			err = json.Unmarshal([]byte(body), &st)
		}
		if err != nil {
			return err
		}
		return checkLedger(t, st, acked, lost, ends, false)
	})
	_ = checkLedger(t, st, acked, lost, ends, true)
	// The workflow instances resume from their last committed step: waiting for their
	// event, their first step run once.
	for _, k := range flows {
		waitFlow(t, hc, url, k, "waiting")
		if !ack(hc, url+"/flow/pay?k="+k+"&n=7") {
			t.Fatalf("event to %s not acknowledged", k)
		}
		got := waitFlow(t, hc, url, k, "complete")
		if o := got.Output; o.A != "a-"+k || o.B != "b-7" || o.Runs != 1 {
			t.Errorf("instance %s output %+v, want a-%s, b-7, its first step run once", k, o, k)
		}
	}
}

// flowStatus is what Workflow instance.status() answers (the ledger's Flow output).
type flowStatus struct {
	Status string
	Output struct {
		A, B string
		Runs int
	}
}

// waitFlow waits until instance k's status is want.
func waitFlow(t *testing.T, hc *http.Client, url, k, want string) flowStatus {
	t.Helper()
	var s flowStatus
	eventually(t, 3*time.Minute, "instance "+k+" "+want, func() error {
		body, err := getWith(hc, url+"/flow/status?k="+k)
		if err == nil {
			err = json.Unmarshal([]byte(body), &s)
		}
		if err != nil {
			return err
		}
		if s.Status != want {
			return fmt.Errorf("status %q", s.Status)
		}
		return nil
	})
	return s
}

// checkLedger compares the stores with the acknowledged writes: every write
// acknowledged before lost − backupRPO or after the store's lost pods were replaced
// (ends) must be in the store, no key twice; the ones acknowledged inside that window
// and missing are counted (logged when final).
func checkLedger(t *testing.T, st ledgerState, acked map[string]time.Time, lost time.Time, ends map[string]time.Time, final bool) error {
	for what, have := range map[string][]string{"Durable Objects": st.Tally, "KV": st.KV, "D1": st.Items, "queue deliveries": st.Delivered} {
		set := map[string]bool{}
		for _, k := range have {
			if set[k] && what != "queue deliveries" {
				return fmt.Errorf("%s: %s is there twice", what, k)
			}
			set[k] = true
		}
		var missing, inWindow []string
		for k, at := range acked {
			if set[k] {
				continue
			}
			if at.After(lost.Add(-backupRPO)) && at.Before(ends[what]) {
				inWindow = append(inWindow, k)
			} else {
				missing = append(missing, fmt.Sprintf("%s (acknowledged %+.1fs from the loss)", k, at.Sub(lost).Seconds()))
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return fmt.Errorf("%s: %d acknowledged writes missing outside the RPO window, e.g. %v", what, len(missing), missing[:min(5, len(missing))])
		}
		if final {
			before := 0
			for _, k := range inWindow {
				if acked[k].Before(lost) {
					before++
				}
			}
			t.Logf("%s: %d acknowledged writes present; missing: %d acknowledged in the %v before the loss, %d in the %.1fs after it until the old pod's processes stopped",
				what, len(acked)-len(inWindow), before, backupRPO, len(inWindow)-before, ends[what].Sub(lost).Seconds())
		}
	}
	return nil
}
