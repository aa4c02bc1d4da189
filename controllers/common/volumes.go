package common

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Reasons of the Events on a store whose pod's volume is pinned to a node that is gone.
const (
	ReasonVolumeMoved    = "VolumeMoved"
	ReasonVolumeStranded = "VolumeStranded"
	ReasonClaimMissing   = "ClaimMissing"
)

// strandedClaim is a pod's claim whose volume can only be used on a node that is lost
// (deleted, or tainted out of service) or drained (cordoned).
type strandedClaim struct {
	claim *corev1.PersistentVolumeClaim
	node  string
	state string // what happened to the node, for the Event
	lost  bool
}

// BackupHolds reports, for a pod of a store, whether the store's backup holds that
// pod's data, so that the pod given a new volume is restored rather than started
// empty: spec.backup is set and status.backup, of the same path and target, lists the
// pod as shipped (its sidecar completed a pass since it started), or as restored (its
// volume was filled from the backup when it started) when its node is lost: a drained
// node still has the newest data, so that pod waits for its first pass instead.
func BackupHolds(spec *fleetv1alpha1.BackupSpec, st *fleetv1alpha1.BackupStatus, path string) func(pod string, lost bool) bool {
	return func(pod string, lost bool) bool {
		if spec == nil || st == nil || st.Path != path || st.Target != BackupTarget(spec, path) {
			return false
		}
		return slices.Contains(st.ShippedPods, pod) || lost && slices.Contains(st.RestoredPods, pod)
	}
}

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes;nodes,verbs=get

// MoveStrandedVolumes handles the pods of obj that cannot be scheduled because a
// volume is pinned (node-local volumes) to a lost or drained node. With a backup, the
// claims and then the pod are deleted: the StatefulSet recreates both, the new claim
// binds where the pod fits and the restore init container refills it (docs/scaling.md).
// Without (holds false for the pod; see BackupHolds), nothing is deleted, the data being only on
// that node: a Warning Event says why the pod waits. A pod whose claim no longer
// exists can never start (the StatefulSet makes claims only with a new pod,
// kubernetes/kubernetes#74374): it is deleted so that both are made again. pods may be
// cached ones (no spec): the pod, its claims, volumes and Nodes are read with api,
// uncached, and only for a pod that could not be scheduled.
func (e Events) MoveStrandedVolumes(ctx context.Context, c client.Client, api client.Reader, obj client.Object, holds func(pod string, lost bool) bool, pods []corev1.Pod) error {
	var errs []error
	for i := range pods {
		if !unschedulable(&pods[i]) {
			continue
		}
		p := &corev1.Pod{}
		if err := api.Get(ctx, client.ObjectKeyFromObject(&pods[i]), p); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		if !unschedulable(p) || p.Spec.NodeName != "" || !statefulSetPod(p) {
			continue
		}
		stranded, missing, err := podClaims(ctx, api, p)
		switch {
		case err != nil:
			errs = append(errs, err)
		case missing != "":
			errs = append(errs, e.recreatePod(ctx, c, obj, p, missing))
		case len(stranded) > 0:
			lost := !slices.ContainsFunc(stranded, func(s strandedClaim) bool { return !s.lost })
			errs = append(errs, e.moveVolumes(ctx, c, api, obj, holds(p.Name, lost), p, stranded))
		}
	}
	return errors.Join(errs...)
}

// podClaims reads the claims pod p's StatefulSet made from its templates (named
// <template>-<pod>, which it makes again; never a claim the user mounted): those pinned
// to a lost or drained node, or the name of one that does not exist.
func podClaims(ctx context.Context, api client.Reader, p *corev1.Pod) (stranded []strandedClaim, missing string, err error) {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != v.Name+"-"+p.Name {
			continue
		}
		name := v.PersistentVolumeClaim.ClaimName
		pvc := &corev1.PersistentVolumeClaim{}
		if err := api.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name}, pvc); apierrors.IsNotFound(err) {
			return nil, name, nil
		} else if err != nil {
			return nil, "", err
		}
		s, err := findStranded(ctx, api, pvc)
		if err != nil {
			return nil, "", err
		}
		if s != nil {
			stranded = append(stranded, *s)
		}
	}
	return stranded, "", nil
}

// statefulSetPod: p is controlled by a StatefulSet, which recreates it and its claims.
func statefulSetPod(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "StatefulSet" && ref.APIVersion == appsv1.SchemeGroupVersion.String()
}

// unschedulable: p is pending, not being deleted, and the scheduler found no node for it.
func unschedulable(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// findStranded reads pvc's bound volume and the one node that volume is pinned to:
// nil unless that node is lost or drained. A NotReady node is left alone: it may come
// back with the data.
func findStranded(ctx context.Context, api client.Reader, pvc *corev1.PersistentVolumeClaim) (*strandedClaim, error) {
	if pvc.Spec.VolumeName == "" {
		return nil, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := api.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	node := pinnedNode(pv)
	if node == "" || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return nil, nil
	}
	n := &corev1.Node{}
	err := api.Get(ctx, types.NamespacedName{Name: node}, n)
	switch {
	case apierrors.IsNotFound(err):
		return &strandedClaim{claim: pvc, node: node, state: "lost (the Node is deleted)", lost: true}, nil
	case err != nil:
		return nil, err
	case outOfService(n):
		return &strandedClaim{claim: pvc, node: node, state: "lost (tainted " + corev1.TaintNodeOutOfService + ")", lost: true}, nil
	case n.Spec.Unschedulable:
		return &strandedClaim{claim: pvc, node: node, state: "drained (cordoned)"}, nil
	}
	return nil, nil
}

// pinnedNode is the one node pv can be used on (a node-local volume: one required term
// with kubernetes.io/hostname In one value); "" when it is not pinned to one node.
func pinnedNode(pv *corev1.PersistentVolume) string {
	a := pv.Spec.NodeAffinity
	if a == nil || a.Required == nil || len(a.Required.NodeSelectorTerms) != 1 {
		return "" // terms are ORed: more than one lets the volume be used elsewhere
	}
	for _, r := range a.Required.NodeSelectorTerms[0].MatchExpressions {
		if r.Key == corev1.LabelHostname && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}

// outOfService: n carries the taint of a non-graceful node shutdown, the admin's word
// that the node is not coming back.
func outOfService(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

// claimGoneWait bounds how long a move waits for the claims it deleted to be gone
// before it deletes the pod; past it, the next pass goes on.
const claimGoneWait = 20 * time.Second

// moveVolumes deletes the stranded claims of pod p, waits until they are gone, then
// deletes p (UID preconditions: never a newer claim or pod of the same name), or,
// without a backup, only says why p waits.
//
// The order matters: a claim of an unscheduled pod goes at once (the claim's
// protection counts scheduled pods only), and a StatefulSet that finds its pod gone
// and a claim still terminating makes neither and retries with a growing back-off
// (it does not watch claims), which kept a shard away for minutes.
func (e Events) moveVolumes(ctx context.Context, c client.Client, api client.Reader, obj client.Object, hasBackup bool, p *corev1.Pod, stranded []strandedClaim) error {
	if !hasBackup {
		for _, s := range stranded {
			e.EventRelated(ctx, obj, p, corev1.EventTypeWarning, ReasonVolumeStranded, "Wait", volumeMessage(p, s, false))
		}
		return nil
	}
	for _, s := range stranded {
		uid := s.claim.UID
		if err := c.Delete(ctx, s.claim, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete PersistentVolumeClaim %s of pod %s: %w", s.claim.Name, p.Name, err)
		}
	}
	for _, s := range stranded {
		if err := waitGone(ctx, api, s.claim); err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
	}
	if err := deletePodAsRead(ctx, c, p); err != nil {
		return err
	}
	for _, s := range stranded {
		e.EventRelated(ctx, obj, p, corev1.EventTypeWarning, ReasonVolumeMoved, "MoveVolume", volumeMessage(p, s, true))
	}
	return nil
}

// recreatePod deletes pod p, which waits for claim, gone: the StatefulSet makes both
// again.
func (e Events) recreatePod(ctx context.Context, c client.Client, obj client.Object, p *corev1.Pod, claim string) error {
	if err := deletePodAsRead(ctx, c, p); err != nil {
		return err
	}
	e.EventRelated(ctx, obj, p, corev1.EventTypeNormal, ReasonClaimMissing, "RecreatePod",
		fmt.Sprintf("pod %s cannot start: its PersistentVolumeClaim %s no longer exists, and the StatefulSet makes a claim only with a new pod; deleted the pod so that both are made again (docs/scaling.md)", p.Name, claim))
	return nil
}

// deletePodAsRead deletes p only as it was read, the version too: a pod the scheduler
// placed since then (its node was uncordoned) is left to run.
func deletePodAsRead(ctx context.Context, c client.Client, p *corev1.Pod) error {
	uid, rv := p.UID, p.ResourceVersion
	if err := c.Delete(ctx, p, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	return nil
}

// waitGone polls, uncached, until claim (this one: its UID) no longer exists.
func waitGone(ctx context.Context, api client.Reader, claim *corev1.PersistentVolumeClaim) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, claimGoneWait, true, func(ctx context.Context) (bool, error) {
		live := &corev1.PersistentVolumeClaim{}
		err := api.Get(ctx, client.ObjectKeyFromObject(claim), live)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && live.UID != claim.UID, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("PersistentVolumeClaim %s still there %s after its deletion: %w", claim.Name, claimGoneWait, err)
	}
	return nil
}

// volumeMessage is the Event's note: why pod p cannot be scheduled, what was done
// (moved) or what the admin can do, and what is lost.
func volumeMessage(p *corev1.Pod, s strandedClaim, moved bool) string {
	const restored = "deleted the claim and the pod, so the StatefulSet recreates both where the pod fits and the new volume is restored from the backup; "
	var what string
	switch {
	case moved && s.lost:
		what = restored + "writes acknowledged after the last shipped pass (about the last second, docs/backup.md) are lost"
	case moved:
		what = restored + "a pod that stopped there cleanly shipped every write it acknowledged and sealed its shard, so nothing is lost"
	default:
		remedy := "uncordon the node"
		if s.lost {
			remedy = "bring the node back"
		}
		what = "the store's backup does not hold all of this pod's data (spec.backup, with the pod in status.backup.shippedPods once its sidecar completed a pass; restoredPods count for a lost node only), so the newest data exists only on that node and the pod waits for it: " + remedy
	}
	return fmt.Sprintf("pod %s cannot be scheduled: its PersistentVolumeClaim %s is on node %s, which is %s; %s (docs/scaling.md)",
		p.Name, s.claim.Name, s.node, s.state, what)
}
