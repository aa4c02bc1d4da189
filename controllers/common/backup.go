package common

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// CheckBackup blocks a store whose backup or restore (under field, "spec" or
// "spec.engine") names a Secret that does not exist, or restores from its own backup
// (docs/backup.md). meta reads Secrets' metadata only: values are never read.
func CheckBackup(ctx context.Context, meta client.Reader, namespace, field string, bk specs.StoreBackup) error {
	if msg := fleetv1alpha1.RestoreConflict(bk.Backup, bk.Restore, bk.Path); msg != "" {
		return Blocked(fleetv1alpha1.ReasonInvalidSpec, field+".restore: "+msg)
	}
	for _, b := range bk.Buckets() {
		name := b.S3.CredentialsSecret.Name
		err := meta.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, ReferenceMeta("Secret"))
		if apierrors.IsNotFound(err) {
			return Blocked(fleetv1alpha1.ReasonSecretNotFound, fmt.Sprintf(
				"%s.%s.s3.credentialsSecret: Secret %q not found in namespace %q (keys %s and %s; docs/backup.md)",
				field, b.Field, name, namespace, fleetv1alpha1.R2AccessKeyIDKey, fleetv1alpha1.R2SecretAccessKeyKey))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Backup status polling (docs/backup.md, "Status and alerts").
const (
	// BackupStatusInterval is how often a store with a backup is looked at again.
	BackupStatusInterval = 30 * time.Second
	// BackupLagWarning is the lag past which a Warning Event BackupLagging is recorded.
	BackupLagWarning = time.Minute
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=delete

// BackupTarget is where a store's pods ship with spec at path (backup.Target.Identity);
// "" without a backup.
func BackupTarget(spec *fleetv1alpha1.BackupSpec, path string) string {
	if spec == nil {
		return ""
	}
	return backup.Target{Endpoint: spec.S3.Endpoint, Bucket: spec.S3.Bucket, Prefix: path}.Identity()
}

// Backup asks each ready pod's sidecar for its backup (backup.StatusPath, over the
// internal plane's mutual TLS) and sums them up: nil without spec. prev is the status so far: when none
// answered it stands if it is of the same target (else nil), and its pod lists carry
// over for the pods of sts that did not answer (see carriedPods). A pod whose store directory was
// wiped under it is deleted, so its restore init container runs again before it
// serves; that and a lag past BackupLagWarning are Warning Events.
func (e Events) Backup(ctx context.Context, c client.Client, opts specs.Options, obj client.Object, spec *fleetv1alpha1.BackupSpec, path string, prev *fleetv1alpha1.BackupStatus, sts *appsv1.StatefulSet, pods []corev1.Pod) *fleetv1alpha1.BackupStatus {
	if spec == nil {
		return nil
	}
	target := BackupTarget(spec, path)
	if prev != nil && (prev.Path != path || prev.Target != target) {
		prev = nil
	}
	if opts.Issuer == nil {
		return prev
	}
	hc, err := opts.Issuer.HTTPClient(ctx, obj.GetNamespace(), 3*time.Second)
	if err != nil {
		log.FromContext(ctx).V(1).Info("backup status unavailable", "error", err.Error())
		return prev
	}
	lists := carriedPods(prev, sts, pods)
	var sum *fleetv1alpha1.BackupStatus
	for _, p := range ReadyPods(pods) {
		st, err := podBackup(ctx, hc, p.Status.PodIP)
		if err != nil {
			log.FromContext(ctx).V(1).Info("backup status unavailable", "pod", p.Name, "error", err.Error())
			continue
		}
		if st.VolumeLost {
			e.Event(ctx, obj, corev1.EventTypeWarning, "VolumeLost", "DeletePod", fmt.Sprintf(
				"pod %s: the store's directory was wiped under it; deleting the pod so its restore container refills it from the backup (docs/backup.md)", p.Name))
			if err := c.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				log.FromContext(ctx).Error(err, "delete the pod of a wiped volume", "pod", p.Name)
			}
			continue
		}
		sum = addBackup(sum, st)
		lists[p.Name] = podCover{shipped: st.Shipped && st.Target == target, restored: st.Restored && st.Target == target}
	}
	if sum == nil {
		return prev
	}
	sum.Path, sum.Target = path, target
	sum.ShippedPods, sum.RestoredPods = lists.names()
	if lag := time.Duration(sum.LagSeconds) * time.Second; lag > BackupLagWarning {
		e.Event(ctx, obj, corev1.EventTypeWarning, "BackupLagging", "Backup", fmt.Sprintf(
			"the backup lags %v behind the newest commit (more than %v): check the bucket and the sidecars' logs (docs/backup.md)", lag, BackupLagWarning))
	}
	return sum
}

// podCover is what a pod last reported of its data in the bucket.
type podCover struct{ shipped, restored bool }

type podCovers map[string]podCover

// carriedPods is prev's lists, for the pods that exist and for the ordinals sts keeps
// (all of prev when sts is unknown): a pod deleted with its lost node is absent until
// the StatefulSet makes it again, and its entry must outlast that gap, or the move of
// its volume waits for a node that is gone. A shard removed by a reshard leaves: it is
// a new pod when the count grows again.
func carriedPods(prev *fleetv1alpha1.BackupStatus, sts *appsv1.StatefulSet, pods []corev1.Pod) podCovers {
	out := podCovers{}
	if prev == nil {
		return out
	}
	keep := func(name string) bool {
		if sts == nil {
			return true
		}
		if slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == name }) {
			return true
		}
		for i := range ptr.Deref(sts.Spec.Replicas, 1) {
			if name == fmt.Sprintf("%s-%d", sts.Name, i) {
				return true
			}
		}
		return false
	}
	for _, name := range slices.Concat(prev.ShippedPods, prev.RestoredPods) {
		if keep(name) {
			out[name] = podCover{shipped: slices.Contains(prev.ShippedPods, name), restored: slices.Contains(prev.RestoredPods, name)}
		}
	}
	return out
}

// names are the sorted shipped and restored pods.
func (l podCovers) names() (shipped, restored []string) {
	for p, c := range l {
		switch {
		case c.shipped:
			shipped = append(shipped, p)
		case c.restored:
			restored = append(restored, p)
		}
	}
	slices.Sort(shipped)
	slices.Sort(restored)
	return shipped, restored
}

func podBackup(ctx context.Context, hc *http.Client, ip string) (backup.Status, error) {
	var st backup.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(ip, strconv.Itoa(podcontract.SidecarPort))+backup.StatusPath, nil)
	if err != nil {
		return st, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s: %s", backup.StatusPath, resp.Status)
	}
	return st, json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&st)
}

// addBackup adds one pod's status to sum: databases add up, lastShipped is the oldest
// of the pods' newest, lastFull the newest, the lag the largest.
func addBackup(sum *fleetv1alpha1.BackupStatus, st backup.Status) *fleetv1alpha1.BackupStatus {
	first := sum == nil
	if first {
		sum = &fleetv1alpha1.BackupStatus{}
	}
	sum.Databases += int32(st.Databases)
	if t := st.LastShipped; t != nil && (first || (sum.LastShipped != nil && t.Before(sum.LastShipped.Time))) {
		sum.LastShipped = &metav1.Time{Time: *t}
	}
	if t := st.LastFull; t != nil && (sum.LastFull == nil || t.After(sum.LastFull.Time)) {
		sum.LastFull = &metav1.Time{Time: *t}
	}
	if lag := int32(st.LagSeconds); lag > sum.LagSeconds {
		sum.LagSeconds = lag
	}
	return sum
}
