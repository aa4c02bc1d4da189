package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

const counterModule = `import { DurableObject } from "cloudflare:workers";
export class Counter extends DurableObject { async increment(n) { return n } }
export default { async fetch(req, env) { return Response.json(await env.COUNTER.getByName("a").increment(1)) } }`

func donsFixture(ns, name, worker string, shards int32, storage *fleetv1alpha1.StorageSpec) *fleetv1alpha1.DurableObjectNamespace {
	return &fleetv1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{
			WorkerRef: fleetv1alpha1.LocalObjectReference{Name: worker}, ClassName: "Counter",
			SQL: true, Shards: ptr.To(shards), Storage: storage,
		},
	}
}

func counterWorker(ns, name, dons string) *fleetv1alpha1.Worker {
	return workerFixture(ns, name, func(w *fleetv1alpha1.Worker) {
		w.Spec.Source.Inline.Modules[0].Content = ptr.To(counterModule)
		w.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "COUNTER", DurableObjectNamespace: &fleetv1alpha1.LocalObjectReference{Name: dons}}}
	})
}

func getDONS(t *testing.T, key types.NamespacedName) *fleetv1alpha1.DurableObjectNamespace {
	t.Helper()
	d := &fleetv1alpha1.DurableObjectNamespace{}
	if err := k8sClient.Get(context.Background(), key, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDurableObjectNamespaceChildren(t *testing.T) {
	cases := []struct {
		name        string
		storage     *fleetv1alpha1.StorageSpec
		wantSize    string
		wantDeleted appsv1.PersistentVolumeClaimRetentionPolicyType
	}{
		{name: "defaults", wantSize: specs.DefaultShardStorage, wantDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
		{name: "delete", storage: &fleetv1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("3Gi")), StorageClassName: ptr.To("fast"), ReclaimPolicy: fleetv1alpha1.ReclaimDelete},
			wantSize: "3Gi", wantDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			w := counterWorker(ns, "chat", "rooms")
			if err := k8sClient.Create(ctx, w); err != nil {
				t.Fatal(err)
			}
			d := donsFixture(ns, "rooms", "chat", 2, tc.storage)
			if err := k8sClient.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKeyFromObject(d)
			setName := render.ShardSetName(d.Name)
			sts := &appsv1.StatefulSet{}
			eventually(t, "statefulset and status", func() error {
				if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: setName}, sts); err != nil {
					return err
				}
				if getDONS(t, key).Status.UniqueKey == "" {
					return fmt.Errorf("no uniqueKey yet")
				}
				return nil
			})
			d = getDONS(t, key)
			// No uid in the key: a namespace re-created under its name keeps its ids.
			wantKey := ns + "-" + d.Name
			if d.Status.UniqueKey != wantKey {
				t.Errorf("status.uniqueKey = %q, want %q", d.Status.UniqueKey, wantKey)
			}
			if *sts.Spec.Replicas != 2 || sts.Spec.ServiceName != setName {
				t.Errorf("replicas %d serviceName %q", *sts.Spec.Replicas, sts.Spec.ServiceName)
			}
			if !metav1.IsControlledBy(sts, d) {
				t.Errorf("statefulset not controlled by the namespace: %+v", sts.OwnerReferences)
			}
			if len(sts.Spec.VolumeClaimTemplates) != 1 {
				t.Fatalf("volumeClaimTemplates: %+v", sts.Spec.VolumeClaimTemplates)
			}
			pvc := sts.Spec.VolumeClaimTemplates[0]
			if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse(tc.wantSize)) != 0 {
				t.Errorf("PVC size %s, want %s", got.String(), tc.wantSize)
			}
			if tc.storage != nil && ptr.Deref(pvc.Spec.StorageClassName, "") != *tc.storage.StorageClassName {
				t.Errorf("storageClassName %v", pvc.Spec.StorageClassName)
			}
			if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenDeleted != tc.wantDeleted || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
				t.Errorf("retention policy %+v, want whenDeleted %s", p, tc.wantDeleted)
			}
			pod := sts.Spec.Template.Spec
			if len(pod.InitContainers) != 1 || ptr.Deref(pod.InitContainers[0].RestartPolicy, "") != corev1.ContainerRestartPolicyAlways {
				t.Errorf("sidecar is not a native sidecar: %+v", pod.InitContainers)
			}
			var wd *corev1.Container
			for i := range pod.Containers {
				if pod.Containers[i].Name == "workerd" {
					wd = &pod.Containers[i]
				}
			}
			if wd == nil {
				t.Fatal("no workerd container")
			}
			args := strings.Join(wd.Args, " ")
			for _, want := range []string{"--socket-addr=gateway=127.0.0.1:9193", "--directory-path=do-storage=/var/lib/workerd/do"} {
				if !strings.Contains(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			mounted := false
			for _, m := range wd.VolumeMounts {
				if m.MountPath == "/var/lib/workerd/do" && m.Name == pvc.Name {
					mounted = true
				}
			}
			if !mounted {
				t.Errorf("PVC not mounted at /var/lib/workerd/do: %+v", wd.VolumeMounts)
			}
			sc := wd.SecurityContext
			if sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !ptr.Deref(sc.RunAsNonRoot, false) || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 {
				t.Errorf("security context %+v", sc)
			}
			podName := false
			for _, e := range wd.Env {
				if e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
					podName = true
				}
			}
			if !podName {
				t.Errorf("no POD_NAME from metadata.name: %+v", wd.Env)
			}
			if l := sts.Spec.Template.Labels; l[podcontract.LabelComponent] != podcontract.ComponentDOShard || l[podcontract.LabelDONS] != d.Name {
				t.Errorf("pod labels %v", l)
			}

			svc := &corev1.Service{}
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: setName}, svc); err != nil {
				t.Fatal(err)
			}
			if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.PublishNotReadyAddresses || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != podcontract.GatewayPort {
				t.Errorf("headless service %+v", svc.Spec)
			}
			if !metav1.IsControlledBy(svc, d) {
				t.Errorf("service not controlled by the namespace")
			}
			// The shard config hosts the class under the uniqueKey.
			var cmName string
			for _, v := range pod.Volumes {
				if v.Name == "config" {
					cmName = v.ConfigMap.Name
				}
			}
			cm := &corev1.ConfigMap{}
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: cmName}, cm); err != nil {
				t.Fatal(err)
			}
			if !metav1.IsControlledBy(cm, d) {
				t.Errorf("configmap not controlled by the namespace")
			}
			conf := cm.Data[podcontract.ConfigFile]
			for _, want := range []string{`uniqueKey = "` + wantKey + `"`, "enableSql = true", `localDisk = "do-storage"`, `name = "gateway"`} {
				if !strings.Contains(conf, want) {
					t.Errorf("shard config lacks %q", want)
				}
			}

			// Status follows the StatefulSet: envtest has no controller-manager, so
			// the test reports both shards ready.
			sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2, CurrentRevision: "r1", UpdateRevision: "r1"}
			if err := k8sClient.Status().Update(ctx, sts); err != nil {
				t.Fatal(err)
			}
			eventually(t, "Ready with 2 ready shards", func() error {
				d := getDONS(t, key)
				c := meta.FindStatusCondition(d.Status.Conditions, fleetv1alpha1.ConditionReady)
				if d.Status.Shards != 2 || d.Status.ReadyShards != 2 || c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("status %+v", d.Status)
				}
				return nil
			})
			// A Worker binding the namespace gets the router with 2 shard gateways.
			eventually(t, "worker renders the router", func() error {
				dep, err := getDeployment(client.ObjectKeyFromObject(w))
				if err != nil {
					return err
				}
				for _, v := range dep.Spec.Template.Spec.Volumes {
					if v.Name != "config" {
						continue
					}
					wcm := &corev1.ConfigMap{}
					if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: v.ConfigMap.Name}, wcm); err != nil {
						return err
					}
					c := wcm.Data[podcontract.ConfigFile]
					for i := 0; i < 2; i++ {
						addr := fmt.Sprintf(`"%s-%d.%s.%s.svc.cluster.local:9093"`, setName, i, setName, ns)
						if !strings.Contains(c, addr) {
							return fmt.Errorf("worker config lacks %s", addr)
						}
					}
					if !strings.Contains(c, `moduleName = "workerd-operator:router"`) {
						return fmt.Errorf("no router binding")
					}
					return nil
				}
				return fmt.Errorf("no config volume")
			})
		})
	}
}

func TestWorkerWaitsForDurableObjectNamespace(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := counterWorker(ns, "early", "later")
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	eventually(t, "blocked on the missing namespace", func() error {
		c := meta.FindStatusCondition(getWorker(t, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonReferenceNotFound || !strings.Contains(c.Message, `DurableObjectNamespace "later" not found`) {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	if err := k8sClient.Create(ctx, donsFixture(ns, "later", "early", 1, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deployment once the namespace exists", func() error {
		_, err := getDeployment(key)
		return err
	})
}

func TestDurableObjectNamespaceDegradedByShardFailure(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	if err := k8sClient.Create(ctx, counterWorker(ns, "w", "d")); err != nil {
		t.Fatal(err)
	}
	d := donsFixture(ns, "d", "w", 1, nil)
	if err := k8sClient.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d-do-0", Labels: map[string]string{
			podcontract.LabelName: "workerd", podcontract.LabelComponent: podcontract.ComponentDOShard, podcontract.LabelDONS: "d",
			// The manager caches only the pods it labels (the pod template's labels).
			podcontract.LabelManagedBy: podcontract.ManagedBy,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "workerd", Image: testOpts.WorkerdImage}}},
	}
	finished := metav1.Now()
	createPodWithStatus(t, pod, corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name:                 "workerd",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: finished}},
		RestartCount:         2,
	}}})
	eventually(t, "Degraded oom", func() error {
		got := getDONS(t, client.ObjectKeyFromObject(d))
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(failure.CauseOOM) ||
			got.Status.LastFailure == nil || got.Status.LastFailure.Pod != "d-do-0" {
			return fmt.Errorf("Degraded %+v lastFailure %+v", c, got.Status.LastFailure)
		}
		return nil
	})
}
