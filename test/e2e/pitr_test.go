package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// pitrModule keeps one value in a Durable Object, a KV key and a D1 table:
// /set?v= writes it to all three, /get answers "<object>,<kv>,<d1 rows>".
const pitrModule = `import { DurableObject } from "cloudflare:workers";
export class Cell extends DurableObject {
  set(v) { this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS c (v TEXT)"); this.ctx.storage.sql.exec("DELETE FROM c"); this.ctx.storage.sql.exec("INSERT INTO c VALUES (?)", v); }
  get() { this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS c (v TEXT)"); return this.ctx.storage.sql.exec("SELECT v FROM c").toArray().map((r) => r.v).join("+"); }
}
export default {
  async fetch(req, env) {
    const u = new URL(req.url), v = u.searchParams.get("v");
    if (u.pathname === "/set") {
      await env.CELL.getByName("cell").set(v);
      await env.KV.put("cell", v);
      await env.DB.prepare("INSERT INTO t (v) VALUES (?)").bind(v).run();
      return new Response("ok");
    }
    const rows = (await env.DB.prepare("SELECT v FROM t ORDER BY rowid").raw()).map((r) => r[0]).join("+");
    return new Response([await env.CELL.getByName("cell").get(), await env.KV.get("cell"), rows].join(","));
  },
};`

// pitrStores are the stores of TestBackupPointInTime with their backup at path
// generation gen and, when restore is set, started from generation gen-1 at restore.
func pitrStores(s3 fleetv1alpha1.S3BucketSource, gen int, at *metav1.Time) []client.Object {
	bk := func(kind string) *fleetv1alpha1.BackupSpec {
		return &fleetv1alpha1.BackupSpec{S3: s3, Path: fmt.Sprintf("pitr/%s-%d", kind, gen)}
	}
	rs := func(kind string) *fleetv1alpha1.RestoreSpec {
		if at == nil {
			return nil
		}
		return &fleetv1alpha1.RestoreSpec{S3: s3, Path: fmt.Sprintf("pitr/%s-%d", kind, gen-1), PointInTime: at}
	}
	del := &fleetv1alpha1.StorageSpec{ReclaimPolicy: fleetv1alpha1.ReclaimDelete}
	return []client.Object{
		&fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "pitr-do"},
			Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "pitr"}, ClassName: "Cell", SQL: true,
				Storage: del, Backup: bk("do"), Restore: rs("do")}},
		&fleetv1alpha1.KVNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "pitr-kv"},
			Spec: fleetv1alpha1.KVNamespaceSpec{Storage: del, Backup: bk("kv"), Restore: rs("kv")}},
		&fleetv1alpha1.D1Database{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "pitr-db"},
			Spec: fleetv1alpha1.D1DatabaseSpec{Storage: del, Backup: bk("d1"), Restore: rs("d1"),
				Migrations: &fleetv1alpha1.D1Migrations{ConfigMap: fleetv1alpha1.LocalObjectReference{Name: "pitr-migrations"}}}},
	}
}

// TestBackupPointInTime is Done means 2 of issue 33: a Durable Object namespace, a KV
// namespace and a D1 database, each with spec.backup, get a first value, then a second
// one; deleted with their claims and created again under their names with spec.restore
// at an instant between the two writes (and a new backup path: docs/backup.md, "Go back
// in time, in place"), they hold exactly the first.
func TestBackupPointInTime(t *testing.T) {
	ctx := context.Background()
	s3 := backupS3(t, "pitr-s3")
	base := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "pitr-migrations"},
			Data: map[string]string{"0001_t.sql": "CREATE TABLE t (v TEXT NOT NULL);"}},
		&fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "pitr"}, Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(pitrModule)}}}},
			Bindings: []fleetv1alpha1.Binding{{Name: "CELL", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: "pitr-do"}},
				{Name: "KV", KVNamespace: &fleetv1alpha1.LocalObjectReference{Name: "pitr-kv"}},
				{Name: "DB", D1Database: &fleetv1alpha1.LocalObjectReference{Name: "pitr-db"}}},
		}},
	}
	for _, o := range base {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	stores := createStores(t, pitrStores(s3, 1, nil))
	waitWorkerReady(t, "pitr")
	url := serviceURL(t, "pitr")
	hc := &http.Client{Timeout: 30 * time.Second}
	if !ack(hc, url+"/set?v=first") {
		t.Fatal("the first write was not acknowledged")
	}
	time.Sleep(backupRPO)
	between := metav1.NewTime(time.Now())
	time.Sleep(2 * time.Second)
	if !ack(hc, url+"/set?v=second") {
		t.Fatal("the second write was not acknowledged")
	}
	if got, err := getWith(hc, url+"/get"); err != nil || got != "second,second,first+second" {
		t.Fatalf("before the restore: %q %v, want second,second,first+second", got, err)
	}
	time.Sleep(backupRPO)
	for _, o := range stores {
		if err := k8sClient.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Minute, "the stores, their pods and claims gone", func() error {
		pvcs := &corev1.PersistentVolumeClaimList{}
		if err := k8sClient.List(ctx, pvcs, client.InNamespace(sampleNS)); err != nil {
			return err
		}
		for _, p := range pvcs.Items {
			if strings.HasPrefix(p.Name, "data-pitr-") {
				return fmt.Errorf("claim %s still there", p.Name)
			}
		}
		pods := &corev1.PodList{}
		if err := k8sClient.List(ctx, pods, client.InNamespace(sampleNS)); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "pitr-do-") || strings.HasPrefix(p.Name, "pitr-kv-") || strings.HasPrefix(p.Name, "pitr-db-") {
				return fmt.Errorf("pod %s still there", p.Name)
			}
		}
		return nil
	})
	createStores(t, pitrStores(s3, 2, &between))
	eventually(t, 3*time.Minute, "the stores as they were between the writes", func() error {
		got, err := getWith(hc, url+"/get")
		if err != nil {
			return err
		}
		if got != "first,first,first" {
			return fmt.Errorf("restored to %s: %q, want first,first,first", between.Format(time.RFC3339Nano), got)
		}
		return nil
	})
}

// createStores creates objs, deletes them when the test ends, and waits until each is Ready.
func createStores(t *testing.T, objs []client.Object) []client.Object {
	t.Helper()
	for _, o := range objs {
		if err := k8sClient.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	for _, o := range objs {
		waitReady(t, o, 5*time.Minute)
	}
	return objs
}

// TestBackupWipedDirectory is the second half of Done means 1 of issue 33: the store
// directory of a running D1 host is wiped on the node (its pod and claim stay). The
// sidecar stops shipping, the manager sees the lost volume in the pod's backup status
// and deletes the pod, and the new pod's restore container refills the directory from
// the bucket: the rows written before are there.
func TestBackupWipedDirectory(t *testing.T) {
	ctx := context.Background()
	s3 := backupS3(t, "wipe-s3")
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "wipe-migrations"},
			Data: map[string]string{"0001_t.sql": "CREATE TABLE t (v TEXT NOT NULL);"}},
		&fleetv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "wipe"}, Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(`export default {
  async fetch(req, env) {
    const v = new URL(req.url).searchParams.get("v");
    if (v) { await env.DB.prepare("INSERT INTO t (v) VALUES (?)").bind(v).run(); return new Response("ok"); }
    return new Response((await env.DB.prepare("SELECT v FROM t ORDER BY rowid").raw()).map((r) => r[0]).join("+"));
  },
};`)}}}},
			Bindings: []fleetv1alpha1.Binding{{Name: "DB", D1Database: &fleetv1alpha1.LocalObjectReference{Name: "wipe-db"}}},
		}},
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	createStores(t, []client.Object{&fleetv1alpha1.D1Database{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "wipe-db"},
		Spec: fleetv1alpha1.D1DatabaseSpec{Storage: &fleetv1alpha1.StorageSpec{ReclaimPolicy: fleetv1alpha1.ReclaimDelete},
			Backup:     &fleetv1alpha1.BackupSpec{S3: s3},
			Migrations: &fleetv1alpha1.D1Migrations{ConfigMap: fleetv1alpha1.LocalObjectReference{Name: "wipe-migrations"}}}}})
	waitWorkerReady(t, "wipe")
	url := serviceURL(t, "wipe")
	hc := &http.Client{Timeout: 30 * time.Second}
	for _, v := range []string{"a", "b", "c"} {
		if !ack(hc, url+"/?v="+v) {
			t.Fatalf("insert %s not acknowledged", v)
		}
	}
	time.Sleep(backupRPO)
	old := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: "wipe-db-d1-0"}, old); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: "data-wipe-db-d1-0"}, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil || pv.Spec.HostPath == nil {
		t.Fatalf("the claim's volume %s is not a hostPath one: %v", pvc.Spec.VolumeName, err)
	}
	dir := filepath.Join(pv.Spec.HostPath.Path, "do")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the store's directory %s: %v entries, %v", dir, len(entries), err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wiped %s (%d entries)", dir, len(entries))
	eventually(t, 4*time.Minute, "the host pod replaced and the rows back", func() error {
		p := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: "wipe-db-d1-0"}, p); err != nil {
			return err
		}
		if p.UID == old.UID {
			return fmt.Errorf("pod %s not replaced yet", p.Name)
		}
		got, err := getWith(hc, url+"/")
		if err != nil {
			return err
		}
		if got != "a+b+c" {
			return fmt.Errorf("rows %q, want a+b+c", got)
		}
		return nil
	})
}
