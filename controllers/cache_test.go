package controller_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// The manager's cache holds the Pods, ConfigMaps and Secrets the operator labels, not
// the other ones of the cluster (issue: RBAC, "cache only the operator's labelled Pods
// and ConfigMaps"). A Worker's source ConfigMap and the Secrets it binds, which the
// operator does not label, are still read, and a change of the ConfigMap still
// re-renders the Worker.
func TestCacheHoldsOnlyLabelledObjects(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	unrelated := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, Data: map[string]string{"k": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, StringData: map[string]string{"k": "v"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/c:1"}}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}, StringData: map[string]string{"token": "s3cr3t"}},
		sourceConfigMap(ns, "bundle", "v1"),
	}
	for _, o := range unrelated {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	w := workerFixture(ns, "from-configmap", withSecretBinding("api", "token"), func(w *fleetv1alpha1.Worker) {
		w.Spec.Source = fleetv1alpha1.WorkerSource{ConfigMap: &fleetv1alpha1.ConfigMapSource{Name: "bundle", Main: "worker.js"}}
	})
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	v1 := waitVersion(t, key, "")
	// The operator's rendered ConfigMap is cached, so the cache has seen the namespace.
	eventually(t, "the operator's ConfigMap in the cache", func() error {
		return inCache(ctx, ns, &corev1.ConfigMapList{}, func(o client.Object) bool { return o.GetLabels()[podcontract.LabelWorker] == key.Name })
	})
	unlabelled := func(o client.Object) bool { return o.GetLabels()[podcontract.LabelManagedBy] != podcontract.ManagedBy }
	for _, l := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.PodList{}, metaList("ConfigMapList"), metaList("SecretList")} {
		if err := inCache(ctx, ns, l, unlabelled); err == nil {
			t.Errorf("the manager's cache holds unlabelled objects: %T %v", l, names(l, unlabelled))
		}
	}

	cm := sourceConfigMap(ns, "bundle", "v2")
	if err := k8sClient.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, key, v1)
}

func sourceConfigMap(ns, name, body string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{
		"worker.js": "export default { fetch() { return new Response('" + body + "') } }",
	}}
}

// waitVersion waits for the Worker's status.version to be set and differ from not.
func waitVersion(t *testing.T, key client.ObjectKey, not string) string {
	t.Helper()
	var v string
	eventually(t, "a rendered version other than "+not, func() error {
		v = getWorker(t, key).Status.Version
		if v == "" || v == not {
			return fmt.Errorf("status.version %q", v)
		}
		return nil
	})
	return v
}

func metaList(kind string) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return l
}

// inCache lists l in ns from the manager's cache and returns nil when an item matches.
func inCache(ctx context.Context, ns string, l client.ObjectList, match func(client.Object) bool) error {
	if err := mgrCache.List(ctx, l, client.InNamespace(ns)); err != nil {
		return err
	}
	items, err := listItems(l)
	if err != nil {
		return err
	}
	for _, o := range items {
		if match(o) {
			return nil
		}
	}
	return fmt.Errorf("no match among %d cached %T", len(items), l)
}

func names(l client.ObjectList, match func(client.Object) bool) []string {
	items, _ := listItems(l)
	var out []string
	for _, o := range items {
		if match(o) {
			out = append(out, o.GetName())
		}
	}
	return out
}

func listItems(l client.ObjectList) ([]client.Object, error) {
	objs, err := apimeta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(client.Object))
	}
	return out, nil
}

// A tenant can put the managed-by label on its own Pods, ConfigMaps and Secrets; the
// cache keeps their metadata (and a Pod's status) only (issue: "tenants can make the manager cache their objects
// whole"), while the internal TLS Secret, which the operator reads, keeps its data.
func TestCacheKeepsNoTenantData(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	label := map[string]string{podcontract.LabelManagedBy: podcontract.ManagedBy}
	big := strings.Repeat("x", 512<<10)
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "posing", Labels: label}, Data: map[string]string{"k": big}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "posing", Labels: label}, StringData: map[string]string{"k": big}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podcontract.InternalTLSSecret, Labels: label},
			StringData: map[string]string{podcontract.InternalTLSCert: "cert"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "posing", Labels: manyLabels(label, 2000), Annotations: map[string]string{"k": big[:200<<10]}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", Env: []corev1.EnvVar{{Name: "K", Value: big}}}}}},
	} {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the labelled objects in the cache", func() error {
		cm, sec, tls := &corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Secret{}
		for name, o := range map[string]client.Object{"posing": cm, podcontract.InternalTLSSecret: tls} {
			if err := mgrCache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
				return err
			}
		}
		if err := mgrCache.Get(ctx, client.ObjectKey{Namespace: ns, Name: "posing"}, sec); err != nil {
			return err
		}
		pod := &corev1.Pod{}
		if err := mgrCache.Get(ctx, client.ObjectKey{Namespace: ns, Name: "posing"}, pod); err != nil {
			return err
		}
		if len(pod.Annotations) != 0 || len(pod.Spec.Containers) != 0 || len(pod.Labels) != 1 {
			return fmt.Errorf("cached Pod: %d annotations, %d containers, %d labels; want its name, the operator's label and its status only",
				len(pod.Annotations), len(pod.Spec.Containers), len(pod.Labels))
		}
		if len(cm.Data) != 0 || len(sec.Data) != 0 {
			return fmt.Errorf("cached data: ConfigMap %d keys, Secret %d keys; want none", len(cm.Data), len(sec.Data))
		}
		if string(tls.Data[podcontract.InternalTLSCert]) != "cert" {
			return fmt.Errorf("the internal TLS Secret is cached without its certificate")
		}
		return nil
	})
}

// manyLabels is base and n labels of the tenant's own.
func manyLabels(base map[string]string, n int) map[string]string {
	out := maps.Clone(base)
	for i := range n {
		out[fmt.Sprintf("tenant.example/l%d", i)] = strings.Repeat("v", 63)
	}
	return out
}

// The cached Deployments, StatefulSets and ReplicaSets keep no pod spec but its volumes
// (the config version a ReplicaSet runs), and no managed fields.
func TestWorkloadMetaKeepsWhatIsRead(t *testing.T) {
	tmpl := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"v": "1"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "workerd", Image: "x"}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "w-abc"}}}}}},
		}
	}
	managed := []metav1.ManagedFieldsEntry{{Manager: "m"}}
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: tmpl()}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Template: tmpl()}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Template: tmpl()}},
	} {
		out, err := cacheTransform(t, o)(o)
		if err != nil {
			t.Fatal(err)
		}
		var got *corev1.PodTemplateSpec
		switch w := out.(type) {
		case *appsv1.Deployment:
			got = &w.Spec.Template
		case *appsv1.StatefulSet:
			got = &w.Spec.Template
		case *appsv1.ReplicaSet:
			got = &w.Spec.Template
		}
		kind := fmt.Sprintf("%T", o)
		if len(got.Spec.Containers) != 0 || len(got.Spec.Volumes) != 1 || got.Spec.Volumes[0].ConfigMap.Name != "w-abc" {
			t.Errorf("%s: pod spec %+v, want only the config volume", kind, got.Spec)
		}
		if got.Labels["a"] != "b" || got.Annotations["v"] != "1" || len(out.(client.Object).GetManagedFields()) != 0 {
			t.Errorf("%s: template metadata %+v, managed fields %v", kind, got.ObjectMeta, out.(client.Object).GetManagedFields())
		}
	}
}

// cacheTransform is the manager's cache transform of o's kind.
func cacheTransform(t *testing.T, o client.Object) func(any) (any, error) {
	t.Helper()
	for k, b := range controller.CacheOptions(nil, "").ByObject {
		if fmt.Sprintf("%T", k) == fmt.Sprintf("%T", o) && b.Transform != nil {
			return b.Transform
		}
	}
	t.Fatalf("no cache transform for %T", o)
	return nil
}
