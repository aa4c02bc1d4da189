package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// The non-graceful node shutdown taint an admin puts on a node that is not coming back
// (https://kubernetes.io/docs/concepts/cluster-administration/node-shutdown/#non-graceful-node-shutdown:
// kubectl taint nodes <node-name> node.kubernetes.io/out-of-service=nodeshutdown:NoExecute).
var outOfServiceTaint = corev1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// TestStrandedVolumeMoves: a shard pod that cannot be scheduled because its node-local
// volume (a local PersistentVolume pinned to one node by kubernetes.io/hostname) is on
// a drained or lost node gets a new volume when the namespace has a backup: its claim
// and the pod are deleted, so the StatefulSet recreates both elsewhere and the restore
// container refills the volume. A node that is merely NotReady is left alone; without
// a backup nothing is deleted and a Warning Event says why the pod waits
// (docs/scaling.md, "Drains and lost nodes").
//
// envtest has no scheduler, kubelet or StatefulSet controller: the test writes what they
// would. Each case also strands a canary shard on a drained node; its Event shows that
// the reconciler has looked at both pods before a case asserts that nothing was deleted.
func TestStrandedVolumeMoves(t *testing.T) {
	cases := []struct {
		name string
		// node is the subject's node as it is when the pod is pending; nil: deleted.
		node *corev1.Node
		// backup: spec.backup is set; reported: status.backup names its path and lists
		// the canary as shipped; shipped: and the subject too.
		backup, reported, shipped bool
		// unowned: the subject pod has the store's labels but no StatefulSet controls it.
		unowned  bool
		want     string // the subject's Event: VolumeMoved, VolumeStranded or none
		wantNote string
	}{
		{name: "drained node", node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, backup: true, reported: true, shipped: true,
			want: common.ReasonVolumeMoved, wantNote: "which is drained (cordoned); deleted the claim and the pod"},
		{name: "deleted node", backup: true, reported: true, shipped: true,
			want: common.ReasonVolumeMoved, wantNote: "which is lost (the Node is deleted); deleted the claim and the pod"},
		{name: "out-of-service node", node: &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{outOfServiceTaint}}}, backup: true, reported: true, shipped: true,
			want: common.ReasonVolumeMoved, wantNote: "which is lost (tainted node.kubernetes.io/out-of-service)"},
		{name: "NotReady node", node: notReadyNode(), backup: true, reported: true, shipped: true},
		{name: "no backup", node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}},
			want: common.ReasonVolumeStranded, wantNote: "the pod waits for it: uncordon the node"},
		{name: "backup set after the pod was stranded", node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, backup: true,
			want: common.ReasonVolumeStranded, wantNote: "does not hold all of this pod's data"},
		// The sidecar reported to the backup but never completed a pass: the bucket may
		// hold none of the pod's data.
		// A pod the StatefulSet does not control is not the operator's to delete, nor are
		// its claims, even with the store's labels.
		{name: "pod not of the StatefulSet", node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, backup: true, reported: true, shipped: true, unowned: true},
		{name: "pod not shipped yet", node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, backup: true, reported: true,
			want: common.ReasonVolumeStranded, wantNote: "does not hold all of this pod's data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			d := strandedDONS(t, ns, tc.backup, tc.reported, tc.shipped)
			subject, canary := ns+"-a", ns+"-b"
			createNode(t, canary, corev1.NodeSpec{Unschedulable: true}, corev1.NodeStatus{})
			if tc.node != nil {
				createNode(t, subject, tc.node.Spec, tc.node.Status)
			}
			podA, pvcA := strandedShard(t, d, 0, subject, !tc.unowned, false)
			podB, pvcB := strandedShard(t, d, 1, canary, true, false) // created second: seen with or after podA
			t.Cleanup(func() {                                        // before the Nodes' cleanup: no pass, even one under way, sees them deleted
				for _, p := range []*corev1.Pod{podA, podB} {
					_ = k8sClient.Delete(context.Background(), p)
				}
			})

			canaryReason := common.ReasonVolumeStranded
			if tc.backup && tc.reported {
				canaryReason = common.ReasonVolumeMoved
			}
			eventually(t, "the canary's Event", func() error { return volumeEvent(ctx, d, podB, canaryReason, pvcB.Name) })
			if canaryReason == common.ReasonVolumeMoved {
				eventually(t, "the canary's claim and pod deleted", func() error { return gone(ctx, pvcB, podB) })
			}
			if tc.want != "" {
				eventually(t, "the subject's Event", func() error { return volumeEvent(ctx, d, podA, tc.want, tc.wantNote) })
			}
			if tc.want == common.ReasonVolumeMoved {
				eventually(t, "the claim and the pod deleted", func() error { return gone(ctx, pvcA, podA) })
				return
			}
			for _, o := range []client.Object{pvcA, podA} {
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
					t.Errorf("%T %s: %v, deleted %v; want it untouched", o, o.GetName(), err, o.GetDeletionTimestamp())
				}
			}
			if err := volumeEvent(ctx, d, podA, common.ReasonVolumeMoved, ""); err == nil {
				t.Errorf("a %s Event for %s", common.ReasonVolumeMoved, podA.Name)
			}
		})
	}
}

// holdFinalizer keeps a deleted claim terminating, as pvc-protection does while a
// scheduled pod uses it.
const holdFinalizer = "test.workerd-operator.io/hold"

// TestStrandedPodDeletedOnceItsClaimIsGone: a move deletes the pod only once its
// claim is gone. A StatefulSet that finds its pod deleted while the claim is still
// terminating creates neither and retries with a growing back-off, since it does not
// watch claims (kubernetes/kubernetes#74374): the shard stayed away for minutes.
func TestStrandedPodDeletedOnceItsClaimIsGone(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	d := strandedDONS(t, ns, true, true, true)
	createNode(t, ns+"-a", corev1.NodeSpec{Unschedulable: true}, corev1.NodeStatus{})
	pod, pvc := strandedShard(t, d, 0, ns+"-a", true, true)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pod) })

	eventually(t, "the claim deleted", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil || pvc.DeletionTimestamp == nil {
			return fmt.Errorf("claim %s not being deleted (%v)", pvc.Name, err)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // more than a pass takes here
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp != nil {
		t.Fatalf("pod %s deleted (%v) while its claim is still terminating", pod.Name, err)
	}
	pvc.Finalizers = nil
	if err := k8sClient.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod deleted", func() error { return gone(ctx, pod) })
	eventually(t, "the Event", func() error { return volumeEvent(ctx, d, pod, common.ReasonVolumeMoved, pvc.Name) })
}

// TestPodWithoutItsClaimIsRecreated: a shard pod waiting for a claim that no longer
// exists (deleted while the StatefulSet's cache still held it) is deleted, so that the
// StatefulSet makes the claim and the pod again.
func TestPodWithoutItsClaimIsRecreated(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	d := strandedDONS(t, ns, false, false, false)
	createNode(t, ns+"-a", corev1.NodeSpec{}, corev1.NodeStatus{})
	pod, pvc := strandedShard(t, d, 0, ns+"-a", true, false)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pod) })
	if err := k8sClient.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod deleted", func() error { return gone(ctx, pod) })
	eventually(t, "the Event", func() error {
		return podEvent(ctx, d, pod, corev1.EventTypeNormal, common.ReasonClaimMissing, "PersistentVolumeClaim "+pvc.Name+" no longer exists")
	})
}

// notReadyNode is a schedulable node whose kubelet stopped posting status
// (https://kubernetes.io/docs/reference/node/node-status/#condition: Ready Unknown).
func notReadyNode() *corev1.Node {
	return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}}
}

// strandedDONS creates a DurableObjectNamespace of two shards (with spec.backup when
// backup, and status.backup naming its path when reported, with shard 1 shipped and
// shard 0 too when shipped) and waits for its StatefulSet.
func strandedDONS(t *testing.T, ns string, backup, reported, shipped bool) *fleetv1alpha1.DurableObjectNamespace {
	t.Helper()
	ctx := context.Background()
	if err := k8sClient.Create(ctx, counterWorker(ns, "counter", "rooms")); err != nil {
		t.Fatal(err)
	}
	d := donsFixture(ns, "rooms", "counter", 2, nil)
	if backup {
		d = backedUpDONS(t, ns, "rooms", "counter", 2)
	}
	if err := k8sClient.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	eventually(t, "the StatefulSet", func() error {
		return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.ShardSetName(d.Name)}, sts)
	})
	if reported {
		// What the manager writes once a pod's sidecar reports shipping (docs/backup.md).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			d.Status.Backup = &fleetv1alpha1.BackupStatus{Path: d.BackupPath(), Target: common.BackupTarget(d.Spec.Backup, d.BackupPath()),
				Databases: 1, ShippedPods: []string{sts.Name + "-1"}}
			if shipped {
				d.Status.Backup.ShippedPods = append(d.Status.Backup.ShippedPods, sts.Name+"-0")
			}
			return k8sClient.Status().Update(ctx, d)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// createNode creates a cluster-scoped Node, deleted at the end of the test.
func createNode(t *testing.T, name string, spec corev1.NodeSpec, st corev1.NodeStatus) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}, Spec: spec}
	if err := k8sClient.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), n) })
	if len(st.Conditions) > 0 {
		n.Status = st
		if err := k8sClient.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
}

// strandedShard creates shard ordinal's claim (the StatefulSet's "data-<pod>"), a local
// PersistentVolume bound to it and pinned to node (the shape of
// https://kubernetes.io/docs/concepts/storage/volumes/#local), and the pending pod the
// scheduler marked Unschedulable, controlled by the StatefulSet when owned; hold: the
// claim keeps holdFinalizer
// (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-conditions).
func strandedShard(t *testing.T, d *fleetv1alpha1.DurableObjectNamespace, ordinal int, node string, owned, hold bool) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
	t.Helper()
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: render.ShardSetName(d.Name)}, sts); err != nil {
		t.Fatal(err)
	}
	podName := fmt.Sprintf("%s-%d", sts.Name, ordinal)
	size := resource.MustParse("1Gi")
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: "data-" + podName, Labels: sts.Spec.Template.Labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To("local-storage"),
			Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			VolumeName: node + "-" + podName,
		},
	}
	if err := k8sClient.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	// envtest runs no pvc-protection controller; in a cluster it removes the finalizer
	// of a deleted claim at once when no scheduled pod uses it (the case of every pod
	// here). hold keeps one of the test's own instead.
	pvc.Finalizers = nil
	if hold {
		pvc.Finalizers = []string{holdFinalizer}
	}
	if err := k8sClient.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	createLocalPV(t, pvc, node, size)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: podName, Labels: sts.Spec.Template.Labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "workerd", Image: "workerd"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}},
		},
	}
	if owned { // as the StatefulSet controller creates it
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
	}
	createPodWithStatus(t, pod, corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/2 nodes are available: 1 node(s) had volume node affinity conflict, 1 node(s) were unschedulable.", LastTransitionTime: metav1.Now(),
	}}})
	return pod, pvc
}

// createLocalPV creates the local PersistentVolume pvc is bound to, pinned to node.
func createLocalPV(t *testing.T, pvc *corev1.PersistentVolumeClaim, node string, size resource.Quantity) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvc.Spec.VolumeName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "local-storage",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/ssd1"}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	if err := k8sClient.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pv) })
}

// volumeEvent finds the Warning Event of reason on d about pod whose note names the pod
// and contains want.
func volumeEvent(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace, pod *corev1.Pod, reason, want string) error {
	return podEvent(ctx, d, pod, corev1.EventTypeWarning, reason, want)
}

// podEvent finds the Event of type and reason on d about pod whose note names the pod
// and contains want.
func podEvent(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace, pod *corev1.Pod, typ, reason, want string) error {
	evs := &eventsv1.EventList{}
	if err := k8sClient.List(ctx, evs, client.InNamespace(d.Namespace)); err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Regarding.Name == d.Name && e.Related != nil && e.Related.Name == pod.Name && e.Reason == reason &&
			e.Type == typ && strings.Contains(e.Note, "pod "+pod.Name+" ") && strings.Contains(e.Note, want) {
			return nil
		}
	}
	return fmt.Errorf("no %s Event %s about pod %s containing %q among %d", typ, reason, pod.Name, want, len(evs.Items))
}

// gone: every object is deleted or being deleted.
func gone(ctx context.Context, objs ...client.Object) error {
	for _, o := range objs {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) || (err == nil && o.GetDeletionTimestamp() != nil) {
			continue
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%T %s still there", o, o.GetName())
	}
	return nil
}
