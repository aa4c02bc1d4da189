package containers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// start runs one instance for namespace ns: the request must name a
// DurableObjectNamespace of ns with spec.container, its exact image, and one of its
// shard pods; the namespace's running instances must stay within maxInstances.
func (s *Server) start(ctx context.Context, ns string, req StartRequest) (StartResponse, error) {
	if err := validStart(req); err != nil {
		return StartResponse{}, err
	}
	d, shard, err := s.authorize(ctx, ns, req)
	if err != nil {
		return StartResponse{}, err
	}
	if err := s.ensureNetworkPolicies(ctx, d); err != nil {
		return StartResponse{}, err
	}
	// One bound for replacing an old pod, creating and waiting for the new one.
	wctx, cancel := context.WithTimeout(ctx, s.StartTimeout)
	defer cancel()
	in := specs.ContainerInstance{DONS: d, ShardPod: shard, Name: req.Name, Args: req.Args, Env: req.Env, Internet: req.Internet}
	// A new run: an exit Wait read of an earlier one no longer describes the instance.
	s.exits.forget(instanceKey(ns, InstanceRequest{ShardPod: req.ShardPod, Name: req.Name}).String())
	pod, err := s.createOrReuse(wctx, in)
	if err != nil {
		return StartResponse{}, err
	}
	running, err := s.waitRunning(wctx, pod, d.Spec.Container.Image)
	if err != nil {
		s.event(ctx, d, pod, corev1.EventTypeWarning, "ContainerStartFailed", "StartContainer",
			fmt.Sprintf("container instance %s (pod %s) did not start: %v", req.Name, pod.Name, err))
		del := client.GracePeriodSeconds(0)
		if derr := s.Client.Delete(context.WithoutCancel(ctx), pod, del); client.IgnoreNotFound(derr) != nil {
			logFrom(ctx).Error(derr, "deleting the pod of an instance that did not start", "pod", pod.Name)
		}
		return StartResponse{}, err
	}
	s.event(ctx, d, running, corev1.EventTypeNormal, "ContainerStarted", "StartContainer",
		fmt.Sprintf("container instance %s of shard %s runs in pod %s at %s", req.Name, shard.Name, running.Name, running.Status.PodIP))
	return StartResponse{Pod: running.Name, Host: running.Status.PodIP}, nil
}

// validStart checks a start's fields and caps its args and env.
func validStart(req StartRequest) error {
	if req.DurableObjectNamespace == "" || req.Image == "" {
		return errorf(http.StatusBadRequest, "durableObjectNamespace and image are required")
	}
	if err := validInstance(req.ShardPod, req.Name); err != nil {
		return err
	}
	size := 0
	for _, a := range req.Args {
		size += len(a)
	}
	for _, e := range req.Env {
		size += len(e)
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return errorf(http.StatusBadRequest, "env entry %q is not NAME=value", truncate(e, 64))
		}
		// The strict rule: API servers before 1.32 refuse names the relaxed one admits,
		// and a refusal here names the variable where the pod's create would not.
		if errs := validation.IsEnvVarName(k); len(errs) > 0 {
			return errorf(http.StatusBadRequest, "env variable %q cannot be set on a Kubernetes container: %s", truncate(k, 64), strings.Join(errs, "; "))
		}
	}
	if size > MaxArgsEnvBytes {
		return errorf(http.StatusBadRequest, "args and env hold %d bytes, more than the %d a container instance may get", size, MaxArgsEnvBytes)
	}
	return nil
}

// validInstance checks the names of an instance.
func validInstance(shardPod, name string) error {
	if errs := validation.IsDNS1123Label(shardPod); len(errs) > 0 {
		return errorf(http.StatusBadRequest, "shardPod %q: %s", truncate(shardPod, 64), strings.Join(errs, "; "))
	}
	if name == "" || len(name) > maxNameBytes {
		return errorf(http.StatusBadRequest, "name must be 1 to %d bytes", maxNameBytes)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// authorize reads the DurableObjectNamespace and the shard pod the request names, in
// namespace ns, and checks the request against them.
func (s *Server) authorize(ctx context.Context, ns string, req StartRequest) (*fleetv1alpha1.DurableObjectNamespace, *corev1.Pod, error) {
	d := &fleetv1alpha1.DurableObjectNamespace{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: req.DurableObjectNamespace}, d); err != nil {
		if apierrors.IsNotFound(err) {
			err = errorf(http.StatusNotFound, "DurableObjectNamespace %s not found in namespace %s", req.DurableObjectNamespace, ns)
		}
		s.event(ctx, nil, nil, corev1.EventTypeWarning, "ContainerRefused", "StartContainer", err.Error())
		return nil, nil, err
	}
	refuse := func(status int, format string, args ...any) (*fleetv1alpha1.DurableObjectNamespace, *corev1.Pod, error) {
		err := errorf(status, format, args...)
		s.event(ctx, d, nil, corev1.EventTypeWarning, "ContainerRefused", "StartContainer", err.Message)
		return nil, nil, err
	}
	spec := d.Spec.Container
	if spec == nil {
		return refuse(http.StatusForbidden, "DurableObjectNamespace %s has no spec.container: its class cannot start containers", d.Name)
	}
	if req.Image != spec.Image {
		return refuse(http.StatusForbidden, "image %q is not spec.container.image of DurableObjectNamespace %s (%q)", req.Image, d.Name, spec.Image)
	}
	shard := &corev1.Pod{}
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: req.ShardPod}, shard)
	if client.IgnoreNotFound(err) != nil {
		return nil, nil, err
	}
	if err != nil || !labels.SelectorFromSet(specs.DONSSelector(d)).Matches(labels.Set(shard.Labels)) {
		return refuse(http.StatusForbidden, "pod %s is not a shard pod of DurableObjectNamespace %s", req.ShardPod, d.Name)
	}
	if shard.DeletionTimestamp != nil {
		return refuse(http.StatusConflict, "shard pod %s is shutting down: it starts no container instances", shard.Name)
	}
	return d, shard, nil
}

// ensureNetworkPolicies applies d's instance NetworkPolicies once per process and
// DurableObjectNamespace, and never takes over one of those names it does not control.
func (s *Server) ensureNetworkPolicies(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace) error {
	if !s.NetworkPolicies {
		return nil
	}
	if _, ok := s.policies.Load(d.UID); ok {
		return nil
	}
	for _, np := range specs.BuildContainerNetworkPolicies(d, s.Options) {
		live := np.DeepCopy()
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(np), live)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil && !metav1.IsControlledBy(live, d) {
			return errorf(http.StatusConflict, "NetworkPolicy %s exists and is not controlled by DurableObjectNamespace %s: delete or rename it", np.Name, d.Name)
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(np)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: raw}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(podcontract.FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("NetworkPolicy %s: %w", np.Name, err)
		}
	}
	s.policies.Store(d.UID, true)
	s.event(ctx, d, nil, corev1.EventTypeNormal, "ContainerNetworkPolicies", "Apply",
		fmt.Sprintf("applied the NetworkPolicies of DurableObjectNamespace %s's container instances", d.Name))
	return nil
}

// createOrReuse returns the instance's pod: the existing one when it still runs this
// shard's instance of the current image, else a new one within maxInstances. A pod
// that cannot be reused (exited, from an earlier shard pod of the same name, another
// image or args) is deleted first, as Docker's create after remove.
func (s *Server) createOrReuse(ctx context.Context, in specs.ContainerInstance) (*corev1.Pod, error) {
	want := specs.BuildContainerPod(in, s.Options)
	for range 3 {
		live := &corev1.Pod{}
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(want), live)
		switch {
		case client.IgnoreNotFound(err) != nil:
			return nil, err
		case err == nil && !isInstance(live, in.ShardPod.Name, in.Name):
			return nil, errorf(http.StatusConflict, "pod %s exists and is not container instance %s of shard %s", live.Name, in.Name, in.ShardPod.Name)
		case err == nil && reusable(live, want):
			logFrom(ctx).Info("container instance pod exists: reusing it", "pod", live.Name)
			return live, nil
		case err == nil:
			if err := s.deleteAndWait(ctx, live); err != nil {
				return nil, err
			}
		}
		pod, err := s.create(ctx, in.DONS, want)
		if !apierrors.IsAlreadyExists(err) {
			return pod, err
		}
	}
	return nil, errorf(http.StatusConflict, "pod %s is being created and deleted concurrently: try again", want.Name)
}

// reusable reports whether live runs what want would: same owner, image, args, env,
// resources (instance type) and internet label, not exited, not being deleted.
func reusable(live, want *corev1.Pod) bool {
	if live.DeletionTimestamp != nil || !ownersEqual(live.OwnerReferences, want.OwnerReferences) ||
		live.Labels[podcontract.LabelInternet] != want.Labels[podcontract.LabelInternet] || len(live.Spec.Containers) != 1 {
		return false
	}
	if _, exited := podExited(live, podcontract.ContainerInstanceContainer); exited {
		return false
	}
	l, w := live.Spec.Containers[0], want.Spec.Containers[0]
	return l.Image == w.Image && slices.Equal(l.Args, w.Args) && slices.Equal(l.Env, w.Env) &&
		hasResources(l.Resources.Limits, w.Resources.Limits) && hasResources(l.Resources.Requests, w.Resources.Requests)
}

// hasResources reports whether live holds every quantity of want: admission (a
// LimitRange) may add others, which do not make the pod another instance type.
func hasResources(live, want corev1.ResourceList) bool {
	for name, q := range want {
		if l, ok := live[name]; !ok || l.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func ownersEqual(a, b []metav1.OwnerReference) bool {
	return len(a) == 1 && len(b) == 1 && a[0].UID == b[0].UID
}

// create counts d's running instances and creates pod when there is room. A pod being
// deleted counts until its container has exited: it runs (and holds its resources) for
// its grace period. The count and the create are one step on this replica only:
// replicas serving starts of the same DurableObjectNamespace at the same moment may
// each let one more through.
func (s *Server) create(ctx context.Context, d *fleetv1alpha1.DurableObjectNamespace, pod *corev1.Pod) (*corev1.Pod, error) {
	mu := s.lock(d.Namespace, d.Name)
	mu.Lock()
	defer mu.Unlock()
	list := &corev1.PodList{}
	if err := s.Client.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingLabels(specs.ContainerInstanceSelector(d.Name))); err != nil {
		return nil, err
	}
	running := 0
	for i := range list.Items {
		p := &list.Items[i]
		if _, exited := podExited(p, podcontract.ContainerInstanceContainer); !exited {
			running++
		}
	}
	if limit := d.Spec.Container.MaxInstancesOrDefault(); int32(running) >= limit {
		err := errorf(http.StatusTooManyRequests, "maxInstances (%d) of DurableObjectNamespace %s reached: "+
			"there is no Container instance available at this time; stop an instance or raise spec.container.maxInstances", limit, d.Name)
		s.event(ctx, d, nil, corev1.EventTypeWarning, "ContainerMaxInstances", "StartContainer", err.Message)
		return nil, err
	}
	created := pod.DeepCopy()
	if err := s.Client.Create(ctx, created); err != nil {
		return nil, err
	}
	s.event(ctx, d, created, corev1.EventTypeNormal, "ContainerCreated", "StartContainer",
		fmt.Sprintf("created pod %s for container instance %s (%d of maxInstances %d running before it)",
			created.Name, created.Annotations[podcontract.AnnotationContainerName], running, d.Spec.Container.MaxInstancesOrDefault()))
	return created, nil
}
