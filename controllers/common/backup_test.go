package common

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// A store's backup status sums its pods' (docs/backup.md, "Metrics"): databases add
// up, lastShipped is the oldest pod's newest ship (every pod shipped at least then),
// lastFull the newest, the lag the largest.
func TestAddBackup(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	sum := addBackup(nil, backup.Status{Databases: 3, LastShipped: at(10), LastFull: at(2), LagSeconds: 1.5})
	sum = addBackup(sum, backup.Status{Databases: 5, LastShipped: at(4), LastFull: at(8), LagSeconds: 0})
	sum = addBackup(sum, backup.Status{Databases: 1, LastShipped: at(7), LagSeconds: 4.2})
	if sum.Databases != 9 || !sum.LastShipped.Time.Equal(*at(4)) || !sum.LastFull.Time.Equal(*at(8)) || sum.LagSeconds != 4 {
		t.Errorf("sum %+v: want 9 databases, lastShipped +4s, lastFull +8s, lag 4", sum)
	}
}

// TestBackupKeepsShippedPods: without an issuer (no pod can be asked) the status so far
// stands when it is of the same path and target, its lists included, and is dropped
// when either changed (its pods shipped elsewhere). A restored pod counts for a lost
// node only.
func TestBackupKeepsShippedPods(t *testing.T) {
	spec := &fleetv1alpha1.BackupSpec{S3: fleetv1alpha1.S3BucketSource{Endpoint: "http://s3:7070", Bucket: "a"}}
	prev := &fleetv1alpha1.BackupStatus{Path: "ns/dons/a", Target: "http://s3:7070/a/ns/dons/a", ShippedPods: []string{"a-do-0"}, RestoredPods: []string{"a-do-1"}}
	if got := (Events{}).Backup(context.Background(), nil, specs.Options{}, nil, spec, "ns/dons/a", prev, nil, nil); got != prev {
		t.Errorf("same path and target: %+v, want the status so far", got)
	}
	if got := (Events{}).Backup(context.Background(), nil, specs.Options{}, nil, spec, "ns/dons/b", prev, nil, nil); got != nil {
		t.Errorf("path changed: %+v, want nil", got)
	}
	other := spec.DeepCopy()
	other.S3.Bucket = "b"
	if got := (Events{}).Backup(context.Background(), nil, specs.Options{}, nil, other, "ns/dons/a", prev, nil, nil); got != nil {
		t.Errorf("bucket changed: %+v, want nil", got)
	}
	holds := BackupHolds(spec, prev, "ns/dons/a")
	for _, c := range []struct {
		pod        string
		lost, want bool
	}{{"a-do-0", false, true}, {"a-do-0", true, true}, {"a-do-1", false, false}, {"a-do-1", true, true}, {"a-do-2", true, false}} {
		if got := holds(c.pod, c.lost); got != c.want {
			t.Errorf("BackupHolds(%s, lost %v) = %v, want %v", c.pod, c.lost, got, c.want)
		}
	}
	if BackupHolds(other, prev, "ns/dons/a")("a-do-0", true) {
		t.Errorf("BackupHolds with another bucket than the status's: true, want false")
	}
}

// TestCarriedPods: a shard removed by a reshard leaves the lists (it is a new pod when
// the count grows again); a pod of an ordinal the StatefulSet keeps stays while it is
// absent (deleted with its lost node, not yet made again): the move of its volume
// depends on it.
func TestCarriedPods(t *testing.T) {
	prev := &fleetv1alpha1.BackupStatus{ShippedPods: []string{"a-0", "a-2", "a-3"}, RestoredPods: []string{"a-1", "a-4"}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a-0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "a-1"}}}
	shipped, restored := carriedPods(prev, sts, pods).names()
	if !slices.Equal(shipped, []string{"a-0", "a-2"}) || !slices.Equal(restored, []string{"a-1"}) {
		t.Errorf("carried %v, %v; want [a-0 a-2], [a-1]", shipped, restored)
	}
	if shipped, restored := carriedPods(prev, nil, pods).names(); len(shipped) != 3 || len(restored) != 2 {
		t.Errorf("StatefulSet unknown: carried %v, %v; want all of the status so far", shipped, restored)
	}
}
