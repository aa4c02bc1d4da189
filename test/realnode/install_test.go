package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/installer"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// install brings the node to what every test runs against: the current operator installed
// by its Helm chart (release workerd-operator in the bundle's namespace), with the custom
// metrics API on (TestHPAOnRequestsInFlight: the node runs no other adapter), and the
// samples Ready. Where the previous release can be built, it gets there by the two
// supported upgrades (TestUpgradeFromPreviousRelease): the previous bundle, then the
// current bundle over it; then the previous chart (taking over the bundle's objects),
// then `helm upgrade` to the current chart.
func install(ctx context.Context, logf func(string, ...any)) error {
	b, err := installer.BuildOverlay(repoRoot, installer.CustomMetricsOverlay, "", "")
	if err != nil {
		return err
	}
	if bundle, err = decodeAll(b); err != nil {
		return err
	}
	for _, o := range bundle {
		if o.GetKind() == "Deployment" {
			managerNS = o.GetNamespace()
		}
	}
	if samples, err = readSamples(repoRoot); err != nil {
		return err
	}
	// The samples' namespace enforces Pod Security "restricted" as the operator's does.
	if err := cluster.labelRestricted(ctx, sampleNS); err != nil {
		return err
	}
	if why := previousSkipped(); why != "" {
		logf("no upgrade: %s", why)
		return installCurrent(ctx, logf)
	}
	if err := upgradeWithBundle(ctx, logf); err != nil {
		return fmt.Errorf("upgrade with the install bundle: %w", err)
	}
	if err := upgradeWithHelm(ctx, logf); err != nil {
		return fmt.Errorf("upgrade with helm: %w", err)
	}
	return applyReady(ctx, "samples", samples, 10*time.Minute)
}

// installCurrent installs the current bundle, the samples, and the chart over the bundle.
func installCurrent(ctx context.Context, logf func(string, ...any)) error {
	if err := applyReady(ctx, "install bundle", bundle, 5*time.Minute); err != nil {
		return err
	}
	logf("operator Ready")
	if err := applyReady(ctx, "samples", samples, 10*time.Minute); err != nil {
		return err
	}
	if err := helmRelease(ctx, repoRoot, imageTag(podcontract.DefaultOperatorImage), false); err != nil {
		return err
	}
	return waitManager(ctx, podcontract.DefaultOperatorImage, 3*time.Minute)
}

// upgradeWithBundle: the previous release's bundle and samples, then the current bundle
// applied over them (`kubectl apply --server-side`) under requests.
func upgradeWithBundle(ctx context.Context, logf func(string, ...any)) error {
	b, err := os.ReadFile(filepath.Join(runDir, previousDir, "install.yaml"))
	if err != nil {
		return err
	}
	prev, err := decodeAll(b)
	if err != nil {
		return err
	}
	if err := applyReady(ctx, previousRelease+" install bundle", prev, 5*time.Minute); err != nil {
		return err
	}
	prevSamples, err := readSamples(previousSrc())
	if err != nil {
		return err
	}
	if err := applyReady(ctx, previousRelease+" samples", prevSamples, 10*time.Minute); err != nil {
		return err
	}
	logf("%s and its samples Ready; applying the current bundle under requests", previousRelease)
	return underRequests(ctx, logf, "install bundle "+previousRelease+" → current", prevSamples, func() error {
		return applyReady(ctx, "install bundle", bundle, 5*time.Minute)
	})
}

// upgradeWithHelm: with the samples removed, the previous release's chart takes over the
// bundle's objects (the move from `kubectl apply` to Helm) and its samples are applied;
// then `helm upgrade` to the current chart under requests.
func upgradeWithHelm(ctx context.Context, logf func(string, ...any)) error {
	prevSamples, err := readSamples(previousSrc())
	if err != nil {
		return err
	}
	if err := cluster.removeAll(ctx, prevSamples); err != nil {
		return err
	}
	// The previous release starts on fresh volumes, not on data the current one wrote.
	if err := cluster.removeClaims(ctx, sampleNS); err != nil {
		return err
	}
	if err := helmRelease(ctx, previousSrc(), previousRelease, false); err != nil {
		return err
	}
	if err := waitManager(ctx, previousOperatorImage, 3*time.Minute); err != nil {
		return err
	}
	if err := applyReady(ctx, previousRelease+" samples", prevSamples, 10*time.Minute); err != nil {
		return err
	}
	logf("%s chart and its samples Ready; helm upgrade under requests", previousRelease)
	return underRequests(ctx, logf, "helm chart "+previousRelease+" → current", prevSamples, func() error {
		return helmRelease(ctx, repoRoot, imageTag(podcontract.DefaultOperatorImage), true)
	})
}

// underRequests runs upgrade while clients request the samples (startUpgradeCheck),
// waits until it is over (waitUpgraded) and records what it kept.
func underRequests(ctx context.Context, logf func(string, ...any), how string, samples []*unstructured.Unstructured, upgrade func() error) error {
	check, err := startUpgradeCheck(ctx, how, samples)
	if err != nil {
		return err
	}
	if err := upgrade(); err != nil {
		return err
	}
	if err := waitUpgraded(ctx, samples); err != nil {
		return err
	}
	logf("upgraded: %s", how)
	return check.finish(ctx)
}

func applyReady(ctx context.Context, what string, objs []*unstructured.Unstructured, timeout time.Duration) error {
	if err := cluster.apply(ctx, objs, 5*time.Minute); err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	if err := cluster.waitReady(ctx, objs, timeout); err != nil {
		return fmt.Errorf("%s not ready: %w", what, err)
	}
	return nil
}

func readSamples(root string) ([]*unstructured.Unstructured, error) {
	objs, err := devcluster.ReadManifests(filepath.Join(root, "config", "samples"))
	for _, s := range objs {
		if s.GetNamespace() == "" {
			s.SetNamespace(sampleNS)
		}
	}
	return objs, err
}

// waitUpgraded waits for the current manager to run and to have rendered the samples'
// workloads again (no template and no pod runs the previous release's sidecar), then for
// every workload in the samples' namespace to be rolled out and stay so for 15 s, and the
// samples Ready.
func waitUpgraded(ctx context.Context, objs []*unstructured.Unstructured) error {
	if err := waitManager(ctx, podcontract.DefaultOperatorImage, 3*time.Minute); err != nil {
		return err
	}
	deadline, steady := time.Now().Add(8*time.Minute), time.Time{}
	for {
		why := notRolledOut(ctx, sampleNS)
		if on, err := workloadsOn(ctx, previousOperatorImage); err != nil || len(on) > 0 {
			why = fmt.Sprintf("still on %s: %v (%v)", previousOperatorImage, on, err)
		}
		switch {
		case why != "":
			steady = time.Time{}
		case steady.IsZero():
			steady = time.Now()
		case time.Since(steady) >= 15*time.Second:
			return cluster.waitReady(ctx, objs, time.Minute)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the samples' workloads not upgraded after 8m: %s", why)
		}
		time.Sleep(time.Second)
	}
}

// notRolledOut says which Deployment or StatefulSet in ns still rolls, or "".
func notRolledOut(ctx context.Context, ns string) string {
	deps, err := cluster.client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, d := range deps.Items {
		if !rolledOut(&d) {
			return fmt.Sprintf("Deployment %s: %+v", d.Name, d.Status)
		}
	}
	sts, err := cluster.client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, s := range sts.Items {
		st, want := s.Status, *s.Spec.Replicas
		if st.ObservedGeneration < s.Generation || st.CurrentRevision != st.UpdateRevision || st.ReadyReplicas != want || st.UpdatedReplicas != want {
			return fmt.Sprintf("StatefulSet %s: %+v", s.Name, st)
		}
	}
	return ""
}

// rolledOut: every replica of d runs its current template and is ready.
func rolledOut(d *appsv1.Deployment) bool {
	st, want := d.Status, *d.Spec.Replicas
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.ReadyReplicas == want && st.Replicas == want
}

// waitManager waits until the manager's Deployment runs image on all its replicas.
func waitManager(ctx context.Context, image string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		why := ""
		d, err := cluster.client.AppsV1().Deployments(managerNS).Get(ctx, managerName(), metav1.GetOptions{})
		if err != nil {
			why = err.Error()
		} else if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			why = "image " + got
		} else if !rolledOut(d) {
			why = fmt.Sprintf("status %+v", d.Status)
		}
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager does not run %s after %s: %s", image, timeout, why)
		}
		time.Sleep(time.Second)
	}
}

func managerName() string {
	for _, o := range bundle {
		if o.GetKind() == "Deployment" {
			return o.GetName()
		}
	}
	return ""
}

// serviceAddr is http://<ClusterIP>:<http port> of a sample's Service.
func serviceAddr(ctx context.Context, name string) (string, error) {
	svc, err := cluster.client.CoreV1().Services(sampleNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	port, ok := httpPort(svc)
	if !ok {
		return "", fmt.Errorf("Service %s has no http port", name)
	}
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, port.Port), nil
}

// getAll reads objs as the API server has them now.
func (n *node) getAll(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	dyn, mapper, err := n.dynamic()
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		r, err := resourceFor(dyn, mapper, o)
		if err != nil {
			return nil, err
		}
		if out[i], err = r.Get(ctx, o.GetName(), metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// removeAll deletes objs, their pods first, and waits until the objects are gone.
func (n *node) removeAll(ctx context.Context, objs []*unstructured.Unstructured) error {
	if err := n.remove(ctx, objs); err != nil {
		return err
	}
	dyn, mapper, err := n.dynamic()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, o := range objs {
		r, err := resourceFor(dyn, mapper, o)
		if err != nil {
			return err
		}
		for {
			_, err := r.Get(ctx, o.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s %s still there after 3m (%v)", o.GetKind(), o.GetName(), err)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

// removeClaims deletes the PersistentVolumeClaims in ns and waits until they are gone.
func (n *node) removeClaims(ctx context.Context, ns string) error {
	pvcs := n.client.CoreV1().PersistentVolumeClaims(ns)
	if err := pvcs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := pvcs.List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PersistentVolumeClaims in %s still there after 2m (%v)", ns, err)
		}
		time.Sleep(time.Second)
	}
}

func imageTag(ref string) string { return ref[strings.LastIndex(ref, ":")+1:] }
