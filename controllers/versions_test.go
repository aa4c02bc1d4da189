package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// updateWorker changes the Worker as a user would, retrying when the controller's status
// write got in between the read and the update.
func updateWorker(t *testing.T, key types.NamespacedName, change func(*fleetv1alpha1.Worker)) *fleetv1alpha1.Worker {
	t.Helper()
	var w *fleetv1alpha1.Worker
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w = getWorker(t, key)
		change(w)
		return k8sClient.Update(context.Background(), w)
	}); err != nil {
		t.Fatal(err)
	}
	return w
}

func setCode(t *testing.T, key types.NamespacedName, code, message string) string {
	t.Helper()
	w := updateWorker(t, key, func(w *fleetv1alpha1.Worker) {
		w.Spec.Source.Inline.Modules[0].Content = ptr.To(code)
		if w.Annotations == nil {
			w.Annotations = map[string]string{}
		}
		w.Annotations[podcontract.AnnotationVersionMessage] = message
	})
	return w.Spec.VersionID()
}

func setDeployment(t *testing.T, key types.NamespacedName, versions ...fleetv1alpha1.DeploymentVersion) {
	t.Helper()
	updateWorker(t, key, func(w *fleetv1alpha1.Worker) {
		w.Spec.Deployment = &fleetv1alpha1.WorkerDeployment{Versions: versions}
	})
}

// waitStored waits for id to be the Worker's newest stored version.
func waitStored(t *testing.T, key types.NamespacedName, id string) {
	t.Helper()
	eventually(t, "version "+id+" stored", func() error {
		if vs := getWorker(t, key).Status.Versions; len(vs) == 0 || vs[0].ID != id {
			return fmt.Errorf("status.versions %+v", vs)
		}
		return nil
	})
}

// readyPods plays the kubelet envtest lacks: a ready pod with the labels of the pod
// template of Deployment key.
func readyPods(t *testing.T, key types.NamespacedName) {
	t.Helper()
	ctx := context.Background()
	dep, err := getDeployment(key)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, GenerateName: key.Name + "-", Labels: dep.Spec.Template.Labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "workerd", Image: "workerd"}}}}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := k8sClient.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	markDeploymentAvailable(t, key)
}

// configOf is the rendered config.capnp the Deployment's pods run.
func configOf(dep *appsv1.Deployment) (string, error) {
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			cm := &corev1.ConfigMap{}
			if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: dep.Namespace, Name: v.ConfigMap.Name}, cm); err != nil {
				return "", err
			}
			return cm.Data[podcontract.ConfigFile], nil
		}
	}
	return "", fmt.Errorf("no config volume")
}

// TestWorkerVersionsAndSplit: every code change is a stored version listed in
// status.versions with its message; a 90/10 deployment runs the second version in the
// split Deployment (a tenth of the pods, at least one), and a version's ingress
// splits only once the other version's pods are available; going back to one version
// keeps the split Deployment until the Worker's own pods all run it unsplit, then
// scales it to zero (the manager deletes no workload); status.previousDeployment is what rollback returns to.
func TestWorkerVersionsAndSplit(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := workerFixture(ns, "canary", func(w *fleetv1alpha1.Worker) { w.Spec.Replicas = ptr.To[int32](3) })
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	v1 := w.Spec.VersionID()
	waitStored(t, key, v1)
	v2 := setCode(t, key, "export default { fetch() { return new Response('v2') } }", "try the new greeting")
	pinned := fleetv1alpha1.DeploymentVersion{VersionID: v1, Percentage: 90}
	setDeployment(t, key, pinned, fleetv1alpha1.DeploymentVersion{VersionID: "latest", Percentage: 10})
	split := types.NamespacedName{Namespace: ns, Name: specs.SplitDeploymentName("canary")}
	eventually(t, "the split Deployment of v2", func() error {
		w := getWorker(t, key)
		if len(w.Status.Versions) != 2 || w.Status.Versions[0].ID != v2 || w.Status.Versions[0].Message != "try the new greeting" || w.Status.Versions[1].ID != v1 {
			return fmt.Errorf("status.versions %+v, want %s (with its message) then %s", w.Status.Versions, v2, v1)
		}
		dep, err := getDeployment(split)
		if err != nil {
			return err
		}
		if got := dep.Spec.Template.Labels[podcontract.LabelWorkerVersion]; got != v2 || *dep.Spec.Replicas != 1 {
			return fmt.Errorf("split Deployment runs %q with %d pods, want %s with 1", got, *dep.Spec.Replicas, v2)
		}
		return nil
	})
	primary, err := getDeployment(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := primary.Spec.Template.Labels[podcontract.LabelWorkerVersion]; got != v1 {
		t.Fatalf("the Worker's Deployment runs %s, want the pinned %s", got, v1)
	}
	if cfg, err := configOf(primary); err != nil || strings.Contains(cfg, "SELF_VERSION") {
		t.Fatalf("the Worker's pods split before the split Deployment has a ready pod (%v)", err)
	}
	readyPods(t, key)
	readyPods(t, split)
	eventually(t, "both versions split", func() error {
		for _, k := range []types.NamespacedName{key, split} {
			dep, err := getDeployment(k)
			if err != nil {
				return err
			}
			other := v1
			if k == key {
				other = v2
			}
			cfg, err := configOf(dep)
			if err != nil || !strings.Contains(cfg, `percentage\":90`) || !strings.Contains(cfg, specs.RoleServiceName("canary", k == key)) {
				return fmt.Errorf("%s: config does not split 90/10 with %s's Service (%v)", k.Name, other, err)
			}
		}
		for _, split := range []bool{false, true} {
			svc := &corev1.Service{}
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: specs.RoleServiceName("canary", split)}, svc); err != nil {
				return err
			}
			if want := fmt.Sprint(split); svc.Spec.Selector[podcontract.LabelSplit] != want {
				return fmt.Errorf("Service %s selects %v, want %s=%s", svc.Name, svc.Spec.Selector, podcontract.LabelSplit, want)
			}
		}
		return nil
	})
	markDeploymentAvailable(t, key)
	markDeploymentAvailable(t, split)
	setDeployment(t, key, fleetv1alpha1.DeploymentVersion{VersionID: v1, Percentage: 100})
	eventually(t, "rollback: the Worker's pods unsplit, the split Deployment sending everything on", func() error {
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		if cfg, err := configOf(dep); err != nil || strings.Contains(cfg, "SELF_VERSION") {
			return fmt.Errorf("the Worker's pods still split (%v)", err)
		}
		sd, err := getDeployment(split)
		if err != nil {
			return err
		}
		if cfg, err := configOf(sd); err != nil || !strings.Contains(cfg, `percentage\":100`) || *sd.Spec.Replicas != 1 {
			return fmt.Errorf("split Deployment: %d pods, config sends all on: %v (%v)", *sd.Spec.Replicas, strings.Contains(cfg, `percentage\":100`), err)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // passes that could retire it too early
	if sd, err := getDeployment(split); err != nil || *sd.Spec.Replicas == 0 {
		t.Fatalf("the split Deployment was retired before the Worker's pods ran unsplit (%v)", err)
	}
	markDeploymentAvailable(t, key)
	eventually(t, "the split Deployment scaled to zero", func() error {
		dep, err := getDeployment(split)
		if err != nil {
			return err
		}
		if *dep.Spec.Replicas != 0 {
			return fmt.Errorf("split Deployment has %d pods", *dep.Spec.Replicas)
		}
		w := getWorker(t, key)
		if len(w.Status.PreviousDeployment) != 2 || w.Status.PreviousDeployment[1].VersionID != v2 {
			return fmt.Errorf("status.previousDeployment %+v, want the 90/10 one", w.Status.PreviousDeployment)
		}
		return nil
	})
}

// TestWorkerDeploymentUnknownVersion: a deployment naming a version that is not stored
// is refused in the Ready condition, naming the field and docs/versions.md; the pods
// keep running what they ran.
func TestWorkerDeploymentUnknownVersion(t *testing.T) {
	ns := newNamespace(t)
	w := workerFixture(ns, "unknown")
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	setDeployment(t, key, fleetv1alpha1.DeploymentVersion{VersionID: "0123456789abcdef", Percentage: 100})
	eventually(t, "InvalidSpec", func() error {
		w := getWorker(t, key)
		for _, c := range w.Status.Conditions {
			if c.Type == "Ready" && c.Reason == fleetv1alpha1.ReasonInvalidSpec &&
				strings.Contains(c.Message, "spec.deployment.versions") && strings.Contains(c.Message, "docs/versions.md") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", w.Status.Conditions)
	})
}

// TestWorkerVersionsKept: past common.VersionsKept versions the oldest are deleted.
func TestWorkerVersionsKept(t *testing.T) {
	ns := newNamespace(t)
	w := workerFixture(ns, "many")
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	first := w.Spec.VersionID()
	var last string
	waitStored(t, key, first)
	for i := range common.VersionsKept + 2 {
		last = setCode(t, key, fmt.Sprintf("export default { fetch() { return new Response('%d') } }", i), "")
		waitStored(t, key, last)
	}
	vs := getWorker(t, key).Status.Versions
	if len(vs) != common.VersionsKept || vs[0].ID != last {
		t.Fatalf("status.versions has %d, newest %s; want %d, newest %s", len(vs), vs[0].ID, common.VersionsKept, last)
	}
	cm := &corev1.ConfigMap{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: common.VersionRecordName("many", first)}, cm); !apierrors.IsNotFound(err) {
		t.Errorf("the first version is still stored: %v", err)
	}
}
