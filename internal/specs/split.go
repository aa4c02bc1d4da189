package specs

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// SplitDeploymentName is the Deployment of the second version of a gradual deployment
// (docs/versions.md); the Worker's own Deployment runs the primary version.
func SplitDeploymentName(worker string) string { return worker + "-split" }

// SplitTokenSecretName is the Secret of the hop token of a Worker's version split.
func SplitTokenSecretName(worker string) string { return SplitDeploymentName(worker) }

// RoleServiceName is the Service of the Worker's own pods (split false) or of its split
// Deployment's pods (split true): where the other version's ingress sends the requests
// it picks (docs/versions.md).
func RoleServiceName(worker string, split bool) string {
	if split {
		return SplitDeploymentName(worker)
	}
	return worker + "-primary"
}

// RoleSelector selects the Worker's own pods (split false) or its split Deployment's.
func RoleSelector(worker string, split bool) map[string]string {
	sel := WorkerSelector(worker)
	sel[podcontract.LabelSplit] = strconv.FormatBool(split)
	return sel
}

// BuildSplitDeployment is the second version's Deployment: the Worker's pod (w runs
// that version) with replicas pods, selected by RoleSelector(true). Its pods are the
// Worker's too (the Service and the /scale selector take them).
func BuildSplitDeployment(w *fleetv1alpha1.Worker, out *render.Output, inputsHash string, opts Options, replicas int32) (*corev1.ConfigMap, *appsv1.Deployment) {
	dep := buildWorkerDeployment(w, out, inputsHash, opts)
	dep.Name = SplitDeploymentName(w.Name)
	dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: RoleSelector(w.Name, true)}
	dep.Spec.Template.Labels[podcontract.LabelSplit] = "true"
	dep.Spec.Replicas = &replicas
	return buildWorkerConfigMap(w, out), dep
}

// BuildRoleService is the ClusterIP Service of RoleSelector(split)'s pods.
func BuildRoleService(w *fleetv1alpha1.Worker, split bool) *corev1.Service {
	svc := buildWorkerService(w)
	svc.Name = RoleServiceName(w.Name, split)
	svc.Annotations = nil
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	svc.Spec.Selector = RoleSelector(w.Name, split)
	return svc
}

// BuildSplitTokenSecret is a new hop token's Secret (32 random bytes, hex).
func BuildSplitTokenSecret(w *fleetv1alpha1.Worker) *corev1.Secret {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: SplitTokenSecretName(w.Name), Namespace: w.Namespace, Labels: workerLabels(w),
			OwnerReferences: []metav1.OwnerReference{ownerRef(w)},
		},
		Data: map[string][]byte{render.SplitTokenKey: []byte(hex.EncodeToString(b))},
	}
}

// RoleAddress is "host:port" of RoleServiceName's Service, for render.SplitVersion.
func RoleAddress(w *fleetv1alpha1.Worker, split bool, clusterDomain string) string {
	v := w.DeepCopy()
	v.Name = RoleServiceName(w.Name, split)
	return render.ServiceAddress(v, render.Options{ClusterDomain: clusterDomain})
}
