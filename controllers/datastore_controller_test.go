package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// A Worker binding a KVNamespace and a D1Database that do not exist yet waits
// (ReferenceNotFound); once they exist, each gets its host StatefulSet (one pod, a PVC,
// the gateway port, the bundled Worker in its config) and the Worker's config reaches
// their gateways. A D1Database whose migrations ConfigMap is missing is blocked.
func TestDataStoreHosts(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := workerFixture(ns, "todo", func(w *fleetv1alpha1.Worker) {
		w.Spec.Bindings = []fleetv1alpha1.Binding{
			{Name: "KV", KVNamespace: &fleetv1alpha1.LocalObjectReference{Name: "cache"}},
			{Name: "DB", D1Database: &fleetv1alpha1.LocalObjectReference{Name: "db"}},
		}
	})
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	wkey := client.ObjectKeyFromObject(w)
	eventually(t, "Worker blocked on the missing KVNamespace", func() error {
		c := meta.FindStatusCondition(getWorker(t, wkey).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonReferenceNotFound || !strings.Contains(c.Message, `KVNamespace "cache" not found`) {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	kvns := &fleetv1alpha1.KVNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}}
	db := &fleetv1alpha1.D1Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: fleetv1alpha1.D1DatabaseSpec{Migrations: &fleetv1alpha1.D1Migrations{ConfigMap: fleetv1alpha1.LocalObjectReference{Name: "db-migrations"}}}}
	for _, o := range []client.Object{kvns, db} {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "D1Database blocked on its migrations ConfigMap", func() error {
		got := &fleetv1alpha1.D1Database{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(db), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonConfigMapNotFound || !strings.Contains(c.Message, "spec.migrations.configMap") {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-migrations"},
		Data: map[string]string{"0001_init.sql": "CREATE TABLE t (id INTEGER);", "README.md": "not a migration"}}
	if err := k8sClient.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		owner   client.Object
		kind    render.DataKind
		bundled string
		mounts  int
	}{{kvns, render.DataKV, "/workerd/kv.js", 2}, {db, render.DataD1, "/workerd/d1.js", 1}} {
		set := render.DataSetName(tc.kind, tc.owner.GetName())
		sts := &appsv1.StatefulSet{}
		eventually(t, set+" statefulset", func() error {
			return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: set}, sts)
		})
		if !metav1.IsControlledBy(sts, tc.owner) || *sts.Spec.Replicas != 1 || sts.Spec.ServiceName != set || len(sts.Spec.VolumeClaimTemplates) != 1 {
			t.Fatalf("%s: statefulset %+v", set, sts.Spec)
		}
		c := sts.Spec.Template.Spec.Containers[0]
		if c.Name != podcontract.WorkerdContainer || len(c.VolumeMounts) < tc.mounts || !strings.Contains(strings.Join(c.Args, " "), "--socket-addr=gateway=") {
			t.Fatalf("%s: workerd container %+v", set, c)
		}
		cfg := &corev1.ConfigMap{}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == "config" {
				if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: v.ConfigMap.Name}, cfg); err != nil {
					t.Fatal(err)
				}
			}
		}
		if conf := cfg.Data[podcontract.ConfigFile]; !strings.Contains(conf, `bundled = "`+tc.bundled+`"`) {
			t.Fatalf("%s: config has no %s:\n%s", set, tc.bundled, conf)
		}
		if tc.kind == render.DataD1 && !strings.Contains(cfg.Data[podcontract.ConfigFile], `0001_init.sql`) || strings.Contains(cfg.Data[podcontract.ConfigFile], "README.md") {
			t.Fatalf("%s: migrations in the config: want 0001_init.sql only", set)
		}
	}
	eventually(t, "Worker config binds both stores", func() error {
		got := getWorker(t, wkey)
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		if c != nil && c.Reason == fleetv1alpha1.ReasonReferenceNotFound {
			return fmt.Errorf("still blocked: %s", c.Message)
		}
		list := &corev1.ConfigMapList{}
		if err := k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{podcontract.LabelWorker: "todo"}); err != nil {
			return err
		}
		for _, m := range list.Items {
			conf := m.Data[podcontract.ConfigFile]
			if strings.Contains(conf, `kvNamespace = "kv:cache"`) && strings.Contains(conf, "cache-kv-0.cache-kv."+ns) && strings.Contains(conf, "db-d1-0.db-d1."+ns) {
				return nil
			}
		}
		return fmt.Errorf("no Worker config with both stores among %d", len(list.Items))
	})
}

// A Queue with a consumer waits for the consumer Worker (ReferenceNotFound); then its
// host pod runs that Worker's code with /workerd/queues.js, whose CONSUMERS names it.
func TestQueueHostRunsConsumer(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	q := &fleetv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs"},
		Spec: fleetv1alpha1.QueueSpec{Consumers: []fleetv1alpha1.QueueConsumer{{Worker: "mailer", DeadLetterQueue: "jobs-dlq"}}}}
	if err := k8sClient.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Queue blocked on its consumer", func() error {
		got := &fleetv1alpha1.Queue{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(q), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonReferenceNotFound || !strings.Contains(c.Message, `Worker "mailer" not found`) {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	if err := k8sClient.Create(ctx, workerFixture(ns, "mailer")); err != nil {
		t.Fatal(err)
	}
	// The dead letter queue, consumed by the same Worker: its consumer joins the host's.
	dlq := &fleetv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs-dlq"},
		Spec: fleetv1alpha1.QueueSpec{Consumers: []fleetv1alpha1.QueueConsumer{{Worker: "mailer"}}}}
	if err := k8sClient.Create(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	eventually(t, "queue host", func() error {
		return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.DataSetName(render.DataQueue, "jobs")}, sts)
	})
	eventually(t, "queue host config", func() error {
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.DataSetName(render.DataQueue, "jobs")}, sts); err != nil {
			return err
		}
		cfg := &corev1.ConfigMap{}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == "config" {
				if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: v.ConfigMap.Name}, cfg); err != nil {
					return err
				}
			}
		}
		conf := cfg.Data[podcontract.ConfigFile]
		for _, want := range []string{`bundled = "/workerd/queues.js"`, `(name = "CONSUMER", service = "mailer")`, `\"deadLetterQueue\":\"jobs-dlq\"`,
			`\"jobs-dlq\":{\"consumer\":\"CONSUMER\"`, `(name = "mailer", worker = (`} {
			if !strings.Contains(conf, want) {
				return fmt.Errorf("queue host config lacks %s:\n%s", want, conf)
			}
		}
		return nil
	})
}
