package worker

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// liveSet is what a pass found of one of the Worker's two Deployments.
type liveSet struct {
	exists bool
	// version is the Worker version its pod template runs.
	version string
	// available: a ready pod of this Deployment runs the current template's version.
	available bool
	// replicas is the Deployment's desired pod count.
	replicas int32
	// rolled: every pod runs the current template.
	rolled bool
	// split: the current template's ingress splits requests with the other version.
	split bool
}

// readLive reads dep and the Worker's pods; a Deployment scaled to zero (a retired split
// one) does not exist.
func readLive(dep *appsv1.Deployment, pods []corev1.Pod) liveSet {
	if dep == nil || dep.UID == "" || ptr.Deref(dep.Spec.Replicas, 1) == 0 {
		return liveSet{}
	}
	want := ptr.Deref(dep.Spec.Replicas, 1)
	s := dep.Status
	l := dep.Spec.Template.Labels
	available := false
	for i := range pods {
		p := &pods[i]
		if p.Labels[podcontract.LabelSplit] == l[podcontract.LabelSplit] && p.Labels[podcontract.LabelWorkerVersion] == l[podcontract.LabelWorkerVersion] &&
			p.DeletionTimestamp == nil && common.PodReady(p) {
			available = true
		}
	}
	return liveSet{
		exists:    true,
		version:   l[podcontract.LabelWorkerVersion],
		split:     dep.Spec.Template.Annotations[podcontract.AnnotationSplit] != "",
		available: available,
		replicas:  want,
		rolled: s.ObservedGeneration >= dep.Generation && s.UpdatedReplicas == want &&
			s.Replicas == want && s.AvailableReplicas == want,
	}
}

// slot is a version one of the Deployments runs, and the split its ingress keeps
// (nil: it serves every request itself).
type slot struct {
	version string
	split   []fleetv1alpha1.DeploymentVersion
}

// plan is what a pass does with the Deployments: the Worker's own one runs primary;
// secondary (version "" for none) runs in the split Deployment, which is scaled to
// zero when retireSecondary. A split needs the two role Services (kept once made).
type plan struct {
	primary, secondary slot
	retireSecondary    bool
	// hopToken: the Worker's hop token exists; every pod trusts hops with it.
	hopToken bool
}

// planDeployment moves the Deployments towards deployed without a request sent to pods
// that are not there: a version's ingress splits only once the other version's pods
// are available; the split Deployment goes only once the Worker's own pods all run
// the one version left, and meanwhile serves every request itself.
func planDeployment(deployed []fleetv1alpha1.DeploymentVersion, primary, secondary liveSet) plan {
	p := plan{primary: slot{version: fleetv1alpha1.PrimaryVersion(deployed).VersionID}}
	if len(deployed) == 1 {
		if !secondary.exists {
			return p
		}
		if primary.version == p.primary.version && primary.rolled && !primary.split {
			p.retireSecondary = true
			return p
		}
		// Until retired it keeps its pods; when it runs a version no longer deployed it
		// sends every request on to the Worker's own pods.
		p.secondary = slot{version: secondary.version}
		if secondary.version != p.primary.version && primary.available {
			p.secondary.split = []fleetv1alpha1.DeploymentVersion{{VersionID: p.primary.version, Percentage: 100}, {VersionID: secondary.version, Percentage: 0}}
		}
		return p
	}
	for _, v := range deployed {
		if v.VersionID != p.primary.version {
			p.secondary.version = v.VersionID
		}
	}
	if secondary.exists && secondary.version == p.secondary.version && secondary.available {
		p.primary.split = deployed
	}
	if primary.exists && primary.version == p.primary.version && primary.available {
		p.secondary.split = deployed
	}
	return p
}

// secondaryReplicas is the split Deployment's pod count: its version's share of
// replicas, rounded up, at least one (none when the Worker is scaled to zero); for a
// version no longer deployed, the count it has (live) until it is retired.
func secondaryReplicas(w *fleetv1alpha1.Worker, deployed []fleetv1alpha1.DeploymentVersion, id string, live liveSet) int32 {
	replicas := ptr.Deref(w.Spec.Replicas, 1)
	if replicas == 0 {
		return 0
	}
	for _, v := range deployed {
		if v.VersionID == id && len(deployed) == 2 {
			return max(1, (replicas*v.Percentage+99)/100)
		}
	}
	return max(1, live.replicas)
}

// retire scales the split Deployment dep (live, controlled by w) to zero: the manager
// does not delete workloads (the garbage collector does, with the Worker).
func retire(ctx context.Context, c client.Client, dep *appsv1.Deployment) error {
	if dep.UID == "" || ptr.Deref(dep.Spec.Replicas, 1) == 0 {
		return nil
	}
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Replicas = ptr.To[int32](0)
	return c.Patch(ctx, dep, patch, client.FieldOwner(podcontract.FieldOwner))
}

// ensureSecret creates secret unless it exists; one that exists must be controlled by
// w (whoever made another knows its token).
func ensureSecret(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker, secret *corev1.Secret) error {
	live := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKeyFromObject(secret), live)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, secret)
	}
	if err == nil && !metav1.IsControlledBy(live, w) {
		return common.Blocked(fleetv1alpha1.ReasonChildConflict, fmt.Sprintf(
			"Secret %s exists and is not this Worker's: a gradual deployment needs it for its hop token (docs/versions.md); delete or rename it", secret.Name))
	}
	return err
}

// hasToken tells whether w's hop token Secret exists: then every pod of w trusts hops.
func hasToken(ctx context.Context, c client.Client, w *fleetv1alpha1.Worker) (bool, error) {
	live := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: specs.SplitTokenSecretName(w.Name)}, live)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil && metav1.IsControlledBy(live, w), err
}

// markSplit records s's split on the pod template (AnnotationSplit).
func markSplit(tmpl *corev1.PodTemplateSpec, s slot) {
	if s.split == nil {
		return
	}
	parts := make([]string, len(s.split))
	for i, v := range s.split {
		parts[i] = fmt.Sprintf("%s@%d", v.VersionID, v.Percentage)
	}
	tmpl.Annotations[podcontract.AnnotationSplit] = strings.Join(parts, ",")
}
