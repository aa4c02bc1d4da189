package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// selectedNodeAnnotation is where the scheduler puts the node it chose for a claim's
// first pod (https://kubernetes.io/docs/concepts/storage/storage-classes/#volume-binding-mode).
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// volumesOn is where, seen from the control-plane host, node's volumesDir is.
func (n *node) volumesOn(node string) string {
	if node == nodeName {
		return volumesDir
	}
	return filepath.Join(n.dir, "nodes", node, "var-lib", filepath.Base(volumesDir))
}

const (
	storageClass = "realnode-local"
	provisioner  = "realnode.workerd-operator.io/local"
	volumesDir   = "/var/lib/realnode-volumes" // inside the namespace: the run directory's var-lib
)

// startProvisioner makes storageClass the default StorageClass and, until ctx ends,
// gives every pending claim of that class a local PersistentVolume on the node the
// scheduler chose for its pod (WaitForFirstConsumer: the claim's selected-node
// annotation), as node-local provisioners do: a directory owned by the pods' user
// (fsGroup does not apply to local volumes), pinned to that node.
func (n *node) startProvisioner(ctx context.Context) error {
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: storageClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       provisioner,
		VolumeBindingMode: &mode,
	}
	if _, err := n.client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	go func() {
		for ctx.Err() == nil {
			if err := n.provisionPending(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "realnode: provisioner:", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return nil
}

func (n *node) provisionPending(ctx context.Context) error {
	pvcs, err := n.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range pvcs.Items {
		node := c.Annotations[selectedNodeAnnotation]
		if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != storageClass || node == "" {
			continue
		}
		name := "pv-" + string(c.UID)
		dir := filepath.Join(n.volumesOn(node), name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		if err := os.Chown(dir, podcontract.RunAsUser, podcontract.RunAsUser); err != nil {
			return err
		}
		size := c.Spec.Resources.Requests[corev1.ResourceStorage]
		if size.IsZero() {
			size = resource.MustParse("1Gi")
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisioner}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   c.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              storageClass,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
				PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: filepath.Join(volumesDir, name)}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}}},
			},
		}
		if _, err := n.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
