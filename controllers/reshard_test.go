package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// backedUpDONS is donsFixture with spec.backup and its credentials Secret.
func backedUpDONS(t *testing.T, ns, name, worker string, shards int32) *fleetv1alpha1.DurableObjectNamespace {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-creds"},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}}
	if err := k8sClient.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	d := donsFixture(ns, name, worker, shards, nil)
	d.Spec.Backup = &fleetv1alpha1.BackupSpec{S3: fleetv1alpha1.S3BucketSource{Endpoint: "http://s3.storage:7070", Bucket: "backups",
		CredentialsSecret: fleetv1alpha1.LocalObjectReference{Name: sec.Name}}}
	return d
}

// shardSetState is the StatefulSet's replicas and the reshard its restore init
// container is given ($WORKERD_OPERATOR_BACKUP's "reshard").
func shardSetState(t *testing.T, ns, name string) (*appsv1.StatefulSet, *backup.Reshard, error) {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: render.ShardSetName(name)}, sts); err != nil {
		return nil, nil, err
	}
	for _, c := range sts.Spec.Template.Spec.InitContainers {
		for _, e := range c.Env {
			if e.Name == podcontract.BackupConfigEnv && c.Name != podcontract.SidecarContainer {
				var cfg backup.Config
				err := json.Unmarshal([]byte(e.Value), &cfg)
				return sts, cfg.Reshard, err
			}
		}
	}
	return sts, nil, nil
}

// routedShards is the count the Worker's pods route by (router CONFIG "shards").
func routedShards(t *testing.T, ns, worker string) (string, error) {
	t.Helper()
	dep := &appsv1.Deployment{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: worker}, dep); err != nil {
		return "", err
	}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name != "config" || v.ConfigMap == nil {
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: v.ConfigMap.Name}, cm); err != nil {
			return "", err
		}
		text := cm.Data[podcontract.ConfigFile]
		m := regexp.MustCompile(`\\"shards\\":(\d+)`).FindStringSubmatch(text)
		if m == nil {
			return "", fmt.Errorf("no router CONFIG in %s", cm.Name)
		}
		return m[1], nil
	}
	return "", fmt.Errorf("deployment %s has no config volume", worker)
}

// TestReshardPhases: spec.shards 2 → 3 stops the old set (0 replicas) before the new
// one starts with 3 and the reshard in its restore config; callers keep routing by 2
// until every new shard is ready, then by 3; status tells the phases and the finished
// change (docs/scaling.md).
func TestReshardPhases(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	if err := k8sClient.Create(ctx, counterWorker(ns, "chat", "rooms")); err != nil {
		t.Fatal(err)
	}
	d := backedUpDONS(t, ns, "rooms", "chat", 2)
	if err := k8sClient.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(d)
	eventually(t, "2 replicas", func() error {
		sts, _, err := shardSetState(t, ns, "rooms")
		if err == nil && *sts.Spec.Replicas != 2 {
			return fmt.Errorf("replicas %d", *sts.Spec.Replicas)
		}
		return err
	})
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d = getDONS(t, key)
		d.Spec.Shards = ptr.To[int32](3)
		return k8sClient.Update(ctx, d)
	}); err != nil {
		t.Fatal(err)
	}
	// envtest runs no StatefulSet controller: no pod exists, so the old set is gone as
	// soon as it is scaled to 0, and the change goes on to Starting.
	eventually(t, "the new set at 3 replicas with the reshard", func() error {
		sts, rs, err := shardSetState(t, ns, "rooms")
		if err != nil {
			return err
		}
		st := getDONS(t, key).Status
		if st.Resharding == nil || st.Resharding.Phase != fleetv1alpha1.ReshardStarting || *sts.Spec.Replicas != 3 || rs == nil {
			return fmt.Errorf("resharding %+v replicas %d reshard %+v", st.Resharding, *sts.Spec.Replicas, rs)
		}
		if rs.From != 2 || !rs.Since.Equal(st.Resharding.StartedAt.Time) || st.Resharding.From != 2 || st.Resharding.To != 3 {
			return fmt.Errorf("reshard config %+v, status %+v", rs, st.Resharding)
		}
		return nil
	})
	if got, err := routedShards(t, ns, "chat"); err != nil || got != "2" {
		t.Errorf("callers route by %q while resharding (%v), want 2: they learn 3 from the new set's gateways", got, err)
	}
	// An old shard that never sealed is waived by annotation: the new set's restore
	// config stops waiting for it; a shard the old set did not have is refused.
	annotate := func(v string) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getDONS(t, key)
			cur.Annotations = map[string]string{fleetv1alpha1.AnnotationUnsealedShards: v}
			return k8sClient.Update(ctx, cur)
		}); err != nil {
			t.Fatal(err)
		}
	}
	annotate("1")
	eventually(t, "shard 1 waived in the restore config", func() error {
		if _, rs, err := shardSetState(t, ns, "rooms"); err != nil || rs == nil || !slices.Equal(rs.Unsealed, []int32{1}) {
			return fmt.Errorf("reshard config %+v (%v)", rs, err)
		}
		return nil
	})
	annotate("2")
	eventually(t, "a shard the old set did not have refused", func() error {
		c := meta.FindStatusCondition(getDONS(t, key).Status.Conditions, "Ready")
		if c == nil || c.Reason != fleetv1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, fleetv1alpha1.AnnotationUnsealedShards) {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	annotate("")
	eventually(t, "no shard waived", func() error {
		if _, rs, err := shardSetState(t, ns, "rooms"); err != nil || rs == nil || len(rs.Unsealed) != 0 {
			return fmt.Errorf("reshard config %+v (%v)", rs, err)
		}
		return nil
	})
	// As the StatefulSet controller would report it: every new shard ready.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts, _, err := shardSetState(t, ns, "rooms")
		if err != nil {
			return err
		}
		sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}
		return k8sClient.Status().Update(ctx, sts)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the change finished and callers route by 3", func() error {
		st := getDONS(t, key).Status
		if st.Resharding != nil || st.LastReshard == nil || st.LastReshard.FinishedAt == nil || st.LastReshard.From != 2 || st.LastReshard.To != 3 {
			return fmt.Errorf("resharding %+v last %+v", st.Resharding, st.LastReshard)
		}
		if got, err := routedShards(t, ns, "chat"); err != nil || got != "3" {
			return fmt.Errorf("callers route by %q (%v)", got, err)
		}
		return nil
	})
	if _, rs, err := shardSetState(t, ns, "rooms"); err != nil || rs == nil || rs.From != 2 {
		t.Errorf("the finished change left the restore config: %+v (shard pods must not roll again)", rs)
	}
}
