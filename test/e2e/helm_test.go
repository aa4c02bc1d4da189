package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/chart"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// The chart's release name and namespace: with these its objects are the install
// bundle's, so the release adopts the operator TestMain installed (the migration path from
// `kubectl apply` to Helm), and the manager's fixed webhook configuration names match.
const (
	helmRelease   = "workerd-operator"
	helmNamespace = "workerd-operator-system"
	managerDeploy = "workerd-operator-controller-manager"
)

// TestHelm installs the chart with the Helm SDK over the bundle TestMain applied (taking
// ownership), waits for the manager of the release to be Ready and to admit a Worker
// (defaulted by its webhook), upgrades with limits.defaultProfile=free and checks that the
// manager rolled to a new ReplicaSet whose webhook defaults the new profile, uninstalls and
// checks that the CRDs and the custom resources are still there. Cleanup re-applies the
// bundle, so the tests after this one find the operator as TestMain left it.
func TestHelm(t *testing.T) {
	ctx := context.Background()
	c, err := chart.Load(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	cfg := helmConfig(t)
	t.Cleanup(func() { reinstallBundle(t) })

	shardsBefore := shardSetGeneration(t, "rooms-do")
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = helmRelease, helmNamespace
	install.TakeOwnership = true
	install.Timeout = 2 * time.Minute
	// The local cluster's Pod and Service CIDRs, as the bundle gets them (LocalizeInstall).
	// The bundle's request.cf flags too (managerArgs): without them every Worker, shard
	// and engine pod of the suite would roll to the chart's manager and back.
	local := map[string]any{
		"outbound":  map[string]any{"defaultAllow": append([]any{"public"}, anySlice(cluster.ClusterCIDRs())...)},
		"requestCF": requestCFValues(),
		"policy":    map[string]any{"workerdVersions": []any{testenv.OtherWorkerdVersion}},
	}
	if _, err := install.RunWithContext(ctx, c, local); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	d := waitRolledOut(t, "after install")
	t.Logf("installed: manager ReplicaSet pod-template-hash %s", podTemplateHash(t, d))
	w := newWorker(t, "helm-admitted", "admitted by the chart's manager", 1)
	if got := admittedProfile(t, w.Name); got != "paid" {
		t.Errorf("Worker %s: spec.limits.profile %q after admission, want the chart's default %q", w.Name, got, "paid")
	}
	waitWorkerReady(t, w.Name)

	before := podTemplateHash(t, d)
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = helmNamespace
	upgrade.Timeout = 2 * time.Minute
	if _, err := upgrade.RunWithContext(ctx, helmRelease, c, map[string]any{"limits": map[string]any{"defaultProfile": "free"}, "outbound": local["outbound"], "requestCF": local["requestCF"]}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	d = waitRolledOut(t, "after upgrade")
	after := podTemplateHash(t, d)
	if after == before {
		t.Fatalf("helm upgrade did not roll the manager: pod-template-hash still %s", before)
	}
	t.Logf("upgraded: manager ReplicaSet %s -> %s", before, after)
	w2 := newWorker(t, "helm-upgraded", "admitted after the upgrade", 1)
	if got := admittedProfile(t, w2.Name); got != "free" {
		t.Errorf("Worker %s: spec.limits.profile %q after the upgrade, want %q", w2.Name, got, "free")
	}

	// The chart's manager, given the bundle's settings, renders the same pods: taking
	// an install over with Helm rolls none of the users' pods.
	if got := shardSetGeneration(t, "rooms-do"); got != shardsBefore {
		t.Errorf("StatefulSet rooms-do: generation %d under the chart's manager, was %d: its pods rolled", got, shardsBefore)
	}

	uninstall := action.NewUninstall(cfg)
	uninstall.Timeout = 2 * time.Minute
	res, err := uninstall.Run(helmRelease)
	if err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if res.Info != "" {
		t.Logf("helm uninstall: %s", res.Info)
	}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: managerDeploy}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("manager Deployment after uninstall: %v, want NotFound", err)
	}
	for _, plural := range []string{"workers", "durableobjectnamespaces", "workflows", "cronschedules"} {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: plural + "." + fleetv1alpha1.GroupVersion.Group}, crd); err != nil {
			t.Errorf("CRD %s after uninstall: %v", plural, err)
		} else if crd.DeletionTimestamp != nil {
			t.Errorf("CRD %s is being deleted", plural)
		}
	}
	for _, name := range []string{w.Name, w2.Name, "hello"} {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, &fleetv1alpha1.Worker{}); err != nil {
			t.Errorf("Worker %s after uninstall: %v", name, err)
		}
	}
}

// helmConfig returns a Helm action configuration for the local cluster (release records
// as Secrets in the release namespace, as the helm CLI keeps them).
func helmConfig(t *testing.T) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := cluster.Kubeconfig(), helmNamespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, helmNamespace, "secret", func(format string, v ...any) { t.Logf("helm: "+format, v...) }); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// waitRolledOut waits until the manager Deployment's current generation is fully rolled
// out (all replicas updated and ready, no pod of an older ReplicaSet left) and returns it.
func waitRolledOut(t *testing.T, when string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	eventually(t, 3*time.Minute, "manager rolled out "+when, func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: helmNamespace, Name: managerDeploy}, d); err != nil {
			return err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.Replicas != want {
			return fmt.Errorf("generation %d observed %d, replicas %d updated %d ready %d (want %d)",
				d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, want)
		}
		pods := &corev1.PodList{}
		if err := k8sClient.List(context.Background(), pods, client.InNamespace(helmNamespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		hash := podTemplateHash(t, d)
		for _, p := range pods.Items {
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
				return fmt.Errorf("pod %s of an older ReplicaSet (%s) still exists", p.Name, p.Labels[appsv1.DefaultDeploymentUniqueLabelKey])
			}
		}
		return nil
	})
	return d
}

// podTemplateHash returns the pod-template-hash of the Deployment's newest ReplicaSet
// (the one whose template is the Deployment's current one).
func podTemplateHash(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	rss := &appsv1.ReplicaSetList{}
	if err := k8sClient.List(context.Background(), rss, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	var newest *appsv1.ReplicaSet
	for i := range rss.Items {
		rs := &rss.Items[i]
		if !slices.ContainsFunc(rs.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == d.UID }) {
			continue
		}
		if rs.Annotations["deployment.kubernetes.io/revision"] == d.Annotations["deployment.kubernetes.io/revision"] {
			newest = rs
		}
	}
	if newest == nil {
		t.Fatalf("no ReplicaSet of revision %s of %s", d.Annotations["deployment.kubernetes.io/revision"], d.Name)
	}
	return newest.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
}

// admittedProfile returns the Worker's spec.limits.profile as stored: what the mutating
// webhook of the serving manager defaulted.
func admittedProfile(t *testing.T, name string) string {
	t.Helper()
	w := &fleetv1alpha1.Worker{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: name}, w); err != nil {
		t.Fatal(err)
	}
	if w.Spec.Limits == nil {
		return ""
	}
	return string(w.Spec.Limits.Profile)
}

// reinstallBundle applies the install bundle again and waits for its manager, as TestMain
// did, so that later tests find the operator installed whatever this test left.
func reinstallBundle(t *testing.T) {
	ctx := context.Background()
	objs, err := bundleObjects()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(ctx, objs, 2*time.Minute); err != nil {
		t.Fatalf("re-apply the install bundle: %v", err)
	}
	if err := cluster.WaitReady(ctx, objs, 3*time.Minute); err != nil {
		t.Fatalf("operator of the re-applied bundle: %v", err)
	}
	waitRolledOut(t, "after re-applying the bundle")
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func shardSetGeneration(t *testing.T, name string) int64 {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: name}, sts); err != nil {
		t.Fatal(err)
	}
	return sts.Generation
}
