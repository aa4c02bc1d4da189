package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// workerFixture is a valid Worker with one module; options mutate it.
func workerFixture(ns, name string, opts ...func(*fleetv1alpha1.Worker)) *fleetv1alpha1.Worker {
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "worker.js", Type: fleetv1alpha1.ModuleESModule,
				Content: ptr.To("export default { fetch() { return new Response('v1') } }"),
			}}}},
		},
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

func withSecretBinding(secret, key string) func(*fleetv1alpha1.Worker) {
	return func(w *fleetv1alpha1.Worker) {
		w.Spec.Bindings = append(w.Spec.Bindings, fleetv1alpha1.Binding{Name: "API_TOKEN", SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
		}})
	}
}

func getWorker(t *testing.T, key types.NamespacedName) *fleetv1alpha1.Worker {
	t.Helper()
	w := &fleetv1alpha1.Worker{}
	if err := k8sClient.Get(context.Background(), key, w); err != nil {
		t.Fatal(err)
	}
	return w
}

func getDeployment(key types.NamespacedName) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, k8sClient.Get(context.Background(), key, d)
}

func TestWorkerChildren(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := workerFixture(ns, "hello", func(w *fleetv1alpha1.Worker) {
		w.Spec.Replicas = ptr.To[int32](2)
		w.Spec.Limits = &fleetv1alpha1.WorkerLimits{MemoryMiB: ptr.To[int32](256)}
		w.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "GREETING", Text: ptr.To("hi")}}
	})
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)

	var dep *appsv1.Deployment
	eventually(t, "deployment created and status written", func() (err error) {
		if dep, err = getDeployment(key); err != nil {
			return err
		}
		if w = getWorker(t, key); w.Status.Version == "" {
			return fmt.Errorf("status.version not written yet")
		}
		return nil
	})

	t.Run("deployment", func(t *testing.T) {
		if got := *dep.Spec.Replicas; got != 2 {
			t.Errorf("replicas = %d, want 2", got)
		}
		assertControlledBy(t, dep, w)
		pod := dep.Spec.Template.Spec
		if len(pod.Containers) != 1 || pod.Containers[0].Name != "workerd" {
			t.Fatalf("containers = %+v, want one named workerd", pod.Containers)
		}
		c := pod.Containers[0]
		if c.Image != testOpts.WorkerdImage {
			t.Errorf("image = %q, want the pinned %q", c.Image, testOpts.WorkerdImage)
		}
		args := strings.Join(c.Args, " ")
		for _, want := range []string{"serve", "--experimental", "/etc/workerd/config.capnp", "--socket-addr=http=$(POD_IP):8080", "--socket-addr=health=$(POD_IP):9090", "--socket-addr=trigger=127.0.0.1:9191"} {
			if !strings.Contains(args, want) {
				t.Errorf("args %q lack %q", args, want)
			}
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Port.IntValue() != 9090 {
			t.Errorf("readiness probe %+v, want HTTP on the health socket 9090", c.ReadinessProbe)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Port.IntValue() != 9090 {
			t.Errorf("liveness probe %+v, want HTTP on the health socket 9090", c.LivenessProbe)
		}
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != testOpts.PreStopSeconds {
			t.Errorf("preStop = %+v, want a %d s sleep", c.Lifecycle, testOpts.PreStopSeconds)
		}
		if got, want := ptr.Deref(pod.TerminationGracePeriodSeconds, 0), testOpts.PreStopSeconds+120+testOpts.DrainSeconds; got != want {
			t.Errorf("terminationGracePeriodSeconds = %d, want %d (preStop + the 120 s owner wait + drain)", got, want)
		}
		if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
			t.Errorf("terminationMessagePolicy = %q", c.TerminationMessagePolicy)
		}
		sc := c.SecurityContext
		if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
			ptr.Deref(sc.AllowPrivilegeEscalation, true) || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("security context %+v is not restricted", sc)
		}
		// 256 MiB heap + workerd's 256 MiB beside it (podcontract.WorkerdOverheadMiB).
		if got := c.Resources.Limits.Memory().String(); got != "512Mi" {
			t.Errorf("memory limit = %s, want 512Mi (heap 256Mi + 256Mi)", got)
		}
		if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "sidecar" ||
			ptr.Deref(pod.InitContainers[0].RestartPolicy, "") != corev1.ContainerRestartPolicyAlways {
			t.Errorf("want the sidecar as a native sidecar init container, got %+v", pod.InitContainers)
		}
		if dep.Spec.Template.Annotations[podcontract.AnnotationVersion] != w.Status.Version || w.Status.Version == "" {
			t.Errorf("pod template version %q, status.version %q: want equal and set",
				dep.Spec.Template.Annotations[podcontract.AnnotationVersion], w.Status.Version)
		}
		managers := map[string]bool{}
		for _, mf := range dep.ManagedFields {
			managers[mf.Manager+"/"+string(mf.Operation)] = true
		}
		if !managers[podcontract.FieldOwner+"/Apply"] {
			t.Errorf("managed fields %v: want server-side apply by %s", managers, podcontract.FieldOwner)
		}
	})

	t.Run("configmap", func(t *testing.T) {
		vol := dep.Spec.Template.Spec.Volumes[0]
		if vol.ConfigMap == nil {
			t.Fatalf("first volume %+v is not the config ConfigMap", vol)
		}
		cm := &corev1.ConfigMap{}
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: vol.ConfigMap.Name}, cm); err != nil {
			t.Fatal(err)
		}
		assertControlledBy(t, cm, w)
		if !ptr.Deref(cm.Immutable, false) {
			t.Error("config ConfigMap should be immutable (content-addressed)")
		}
		var config string
		for _, v := range cm.Data {
			if strings.Contains(v, "Workerd.Config") {
				config = v
			}
		}
		if !strings.Contains(config, "--max-old-space-size=256") {
			t.Errorf("rendered config lacks the V8 heap flag for memoryMiB 256:\n%s", config)
		}
	})

	t.Run("service", func(t *testing.T) {
		svc := &corev1.Service{}
		if err := k8sClient.Get(ctx, key, svc); err != nil {
			t.Fatal(err)
		}
		assertControlledBy(t, svc, w)
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].Port != 8080 {
			t.Errorf("service ports %+v: want only http on 8080 (internal sockets never exposed)", svc.Spec.Ports)
		}
		if want := fmt.Sprintf("http://hello.%s.svc.cluster.local:8080", ns); w.Status.URL != want {
			t.Errorf("status.url = %q, want %q", w.Status.URL, want)
		}
		// The rpc Service: ClusterIP only, the rpc socket only.
		rpc := &corev1.Service{}
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hello-rpc"}, rpc); err != nil {
			t.Fatal(err)
		}
		assertControlledBy(t, rpc, w)
		if rpc.Spec.Type != corev1.ServiceTypeClusterIP || len(rpc.Spec.Ports) != 1 || rpc.Spec.Ports[0].Name != "rpc" || rpc.Spec.Ports[0].Port != 9095 {
			t.Errorf("rpc service %+v: want ClusterIP with only rpc on 9095", rpc.Spec)
		}
	})

	t.Run("ready after rollout", func(t *testing.T) {
		markDeploymentAvailable(t, key)
		eventually(t, "Ready=True", func() error {
			w := getWorker(t, key)
			c := meta.FindStatusCondition(w.Status.Conditions, fleetv1alpha1.ConditionReady)
			if c == nil || c.Status != metav1.ConditionTrue || w.Status.ReadyReplicas != 2 || w.Status.ObservedGeneration != w.Generation {
				return fmt.Errorf("conditions %+v readyReplicas %d", w.Status.Conditions, w.Status.ReadyReplicas)
			}
			return nil
		})
	})
}

func TestWorkerModuleChangeRollsPods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := workerFixture(ns, "roll")
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	var v1, t1 string
	eventually(t, "first version", func() error {
		w := getWorker(t, key)
		dep, err := getDeployment(key)
		if err != nil || w.Status.Version == "" {
			return fmt.Errorf("not yet: %v", err)
		}
		v1, t1 = w.Status.Version, dep.Spec.Template.Annotations[podcontract.AnnotationVersion]
		return nil
	})
	updateWorker(t, key, func(w *fleetv1alpha1.Worker) {
		w.Spec.Source.Inline.Modules[0].Content = ptr.To("export default { fetch() { return new Response('v2') } }")
	})
	eventually(t, "new version", func() error {
		w := getWorker(t, key)
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		if w.Status.Version == v1 || dep.Spec.Template.Annotations[podcontract.AnnotationVersion] == t1 {
			return fmt.Errorf("status.version %q and template %q unchanged", w.Status.Version, dep.Spec.Template.Annotations[podcontract.AnnotationVersion])
		}
		if dep.Spec.Template.Annotations[podcontract.AnnotationVersion] != w.Status.Version {
			return fmt.Errorf("template version %q != status.version %q", dep.Spec.Template.Annotations[podcontract.AnnotationVersion], w.Status.Version)
		}
		return nil
	})
}

// A Worker with several missing references names every one of them in its Ready
// condition at once (the reason is the first one's), so they can be fixed together.
func TestWorkerReportsEveryMissingReference(t *testing.T) {
	ns := newNamespace(t)
	w := workerFixture(ns, "many", withSecretBinding("api", "token"), func(w *fleetv1alpha1.Worker) {
		w.Spec.Bindings = append(w.Spec.Bindings,
			fleetv1alpha1.Binding{Name: "KV", KVNamespace: &fleetv1alpha1.LocalObjectReference{Name: "cache"}},
			fleetv1alpha1.Binding{Name: "PHOTOS", R2Bucket: &fleetv1alpha1.LocalObjectReference{Name: "photos"}},
			fleetv1alpha1.Binding{Name: "ORDERS", Workflow: &fleetv1alpha1.LocalObjectReference{Name: "orders"}})
		w.Spec.Tails = []fleetv1alpha1.TailConsumer{{Service: "backend"}}
	})
	if err := k8sClient.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`spec.bindings[0] (API_TOKEN): Secret "api" not found`,
		`spec.tails[0]: Worker "backend" not found`,
		`spec.bindings[3] (ORDERS): Workflow "orders" not found`,
		`spec.bindings[1] (KV): KVNamespace "cache" not found`,
		`spec.bindings[2] (PHOTOS): R2Bucket "photos" not found`,
	}
	eventually(t, "Ready=False naming every missing reference", func() error {
		c := meta.FindStatusCondition(getWorker(t, client.ObjectKeyFromObject(w)).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonSecretNotFound {
			return fmt.Errorf("Ready condition %+v, want reason SecretNotFound", c)
		}
		for _, m := range want {
			if !strings.Contains(c.Message, m) {
				return fmt.Errorf("Ready message %q lacks %q", c.Message, m)
			}
		}
		return nil
	})
}

func TestWorkerSecretLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := workerFixture(ns, "secretive", withSecretBinding("api", "token"))
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)

	eventually(t, "Ready=False naming the missing Secret", func() error {
		w := getWorker(t, key)
		c := meta.FindStatusCondition(w.Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fleetv1alpha1.ReasonSecretNotFound || !strings.Contains(c.Message, `"api"`) {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	if _, err := getDeployment(key); err == nil {
		t.Fatal("a Deployment was created although its Secret is missing")
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}, StringData: map[string]string{"token": "s3cr3t-v1"}}
	if err := k8sClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	var inputs1 string
	eventually(t, "recovers when the Secret appears", func() error {
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(getWorker(t, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason == fleetv1alpha1.ReasonSecretNotFound {
			return fmt.Errorf("still %+v", c)
		}
		inputs1 = dep.Spec.Template.Annotations[podcontract.AnnotationInputs]
		env := dep.Spec.Template.Spec.Containers[0].Env
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "api" && e.ValueFrom.SecretKeyRef.Key == "token" {
				return nil
			}
		}
		return fmt.Errorf("workerd env %+v has no secretKeyRef to api/token", env)
	})

	// The secret value never lands in a ConfigMap.
	cms := &corev1.ConfigMapList{}
	if err := k8sClient.List(ctx, cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		for k, v := range cm.Data {
			if strings.Contains(v, "s3cr3t") {
				t.Errorf("ConfigMap %s key %s holds the secret value", cm.Name, k)
			}
		}
	}

	secret.StringData = map[string]string{"token": "s3cr3t-v2"}
	if err := k8sClient.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "secret change rolls the pod template", func() error {
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		if got := dep.Spec.Template.Annotations[podcontract.AnnotationInputs]; got == inputs1 {
			return fmt.Errorf("inputs annotation unchanged: %s", got)
		}
		return nil
	})
}

func TestWorkerScaleSubresource(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	// spec.replicas is set by the defaulting webhook in a cluster; envtest runs none here.
	w := workerFixture(ns, "scaled", func(w *fleetv1alpha1.Worker) { w.Spec.Replicas = ptr.To[int32](1) })
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	eventually(t, "deployment", func() error { _, err := getDeployment(key); return err })

	// What `kubectl scale --replicas=3 worker/scaled` does: read and update /scale.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale := &autoscalingv1.Scale{}
		if err := k8sClient.SubResource("scale").Get(ctx, w, scale); err != nil {
			return err
		}
		scale.Spec.Replicas = 3
		return k8sClient.SubResource("scale").Update(ctx, w, client.WithSubResourceBody(scale))
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deployment scaled to 3", func() error {
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		if *dep.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d", *dep.Spec.Replicas)
		}
		return nil
	})
	eventually(t, "scale selector published", func() error {
		s := &autoscalingv1.Scale{}
		if err := k8sClient.SubResource("scale").Get(ctx, getWorker(t, key), s); err != nil {
			return err
		}
		if !strings.Contains(s.Status.Selector, "fleet.workerd-operator.io/worker=scaled") {
			return fmt.Errorf("scale selector %q", s.Status.Selector)
		}
		return nil
	})
}

func TestWorkerServiceBindingWaitsForTarget(t *testing.T) {
	// The binding connects to the rpc Service, never the http port (here 9000).
	waitsForTarget(t, func(w *fleetv1alpha1.Worker) {
		w.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "BACKEND", Service: &fleetv1alpha1.ServiceBinding{Name: "backend"}}}
	}, `spec.bindings[0] (BACKEND): Worker "backend"`, "backend-rpc.%s.svc.cluster.local:9095")
}

// A tail consumer (spec.tails) is resolved like a service binding's Worker: the caller
// waits for it, then delivers its tail events to its rpc Service.
func TestWorkerTailWaitsForTarget(t *testing.T) {
	waitsForTarget(t, func(w *fleetv1alpha1.Worker) {
		w.Spec.Tails = []fleetv1alpha1.TailConsumer{{Service: "backend"}}
	}, `spec.tails[0]: Worker "backend"`, "backend-rpc.%s.svc.cluster.local:9095")
}

// waitsForTarget creates Worker caller (mutated by refer) in a new namespace, expects
// Ready=False ReferenceNotFound with a message holding wantMsg, creates Worker backend
// and expects caller's config to hold wantAddr (a format taking the namespace).
func waitsForTarget(t *testing.T, refer func(*fleetv1alpha1.Worker), wantMsg, wantAddr string) {
	t.Helper()
	ctx := context.Background()
	ns := newNamespace(t)
	caller := workerFixture(ns, "caller", refer)
	if err := k8sClient.Create(ctx, caller); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(caller)
	eventually(t, "ReferenceNotFound", func() error {
		c := meta.FindStatusCondition(getWorker(t, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonReferenceNotFound || !strings.Contains(c.Message, wantMsg) {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	backend := workerFixture(ns, "backend", func(w *fleetv1alpha1.Worker) {
		w.Spec.Service = &fleetv1alpha1.WorkerServiceSpec{Port: ptr.To[int32](9000)}
	})
	if err := k8sClient.Create(ctx, backend); err != nil {
		t.Fatal(err)
	}
	eventually(t, "caller rendered against the backend's rpc Service address", func() error {
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		cm := &corev1.ConfigMap{}
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: dep.Spec.Template.Spec.Volumes[0].ConfigMap.Name}, cm); err != nil {
			return err
		}
		want := fmt.Sprintf(wantAddr, ns)
		for _, v := range cm.Data {
			if strings.Contains(v, want) {
				return nil
			}
		}
		return fmt.Errorf("config does not address %s", want)
	})
}

// markDeploymentAvailable plays the part of the Deployment controller envtest lacks.
func markDeploymentAvailable(t *testing.T, key types.NamespacedName) {
	t.Helper()
	// The controller may write the Deployment between the read and the update.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		n := *dep.Spec.Replicas
		dep.Status = appsv1.DeploymentStatus{
			ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		}
		return k8sClient.Status().Update(context.Background(), dep)
	}); err != nil {
		t.Fatal(err)
	}
}

func assertControlledBy(t *testing.T, obj metav1.Object, owner *fleetv1alpha1.Worker) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != owner.UID || ref.Kind != "Worker" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("%s: controller reference %+v, want the Worker %s with blockOwnerDeletion (garbage collection deletes it with the Worker)", obj.GetName(), ref, owner.Name)
	}
}
