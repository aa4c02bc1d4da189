package containers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// fatalWaiting are the waiting reasons of a container that will not start by waiting
// longer: the image cannot be pulled or the container not created.
var fatalWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

func logFrom(ctx context.Context) logr.Logger { return logr.FromContextOrDiscard(ctx) }

// isInstance reports whether p is the pod of container instance name of shardPod.
func isInstance(p *corev1.Pod, shardPod, name string) bool {
	l := p.Labels
	return l[podcontract.LabelName] == podcontract.ContainerAppName && l[podcontract.LabelComponent] == podcontract.ComponentContainer &&
		l[podcontract.LabelShardPod] == shardPod && p.Annotations[podcontract.AnnotationContainerName] == name
}

// instanceKey is the pod of the instance req names in namespace ns.
func instanceKey(ns string, req InstanceRequest) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: specs.ContainerPodName(ns, req.ShardPod, req.Name)}
}

// getInstance reads the instance's pod: nil when there is none; an error when the pod
// of that name is not that instance.
func (s *Server) getInstance(ctx context.Context, ns string, req InstanceRequest) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	if err := s.Client.Get(ctx, instanceKey(ns, req), p); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !isInstance(p, req.ShardPod, req.Name) {
		return nil, errorf(http.StatusNotFound, "pod %s is not container instance %s of shard %s", p.Name, req.Name, req.ShardPod)
	}
	return p, nil
}

// waitRunning waits until pod runs with an IP and returns it; it fails at once when
// its container cannot start (the image cannot be pulled, ...) or exits, and when ctx
// ends with the state the pod was last in.
func (s *Server) waitRunning(ctx context.Context, pod *corev1.Pod, image string) (*corev1.Pod, error) {
	var running *corev1.Pod
	last := "no status yet"
	err := s.watchPod(ctx, client.ObjectKeyFromObject(pod), func(p *corev1.Pod) (bool, error) {
		switch {
		case p == nil || p.UID != pod.UID:
			return false, errorf(http.StatusConflict, "pod %s was deleted before it ran", pod.Name)
		case p.DeletionTimestamp != nil:
			return false, errorf(http.StatusConflict, "pod %s is being deleted (stopped) before it ran", pod.Name)
		case p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "":
			running = p
			return true, nil
		}
		if code, exited := podExited(p, podcontract.ContainerInstanceContainer); exited {
			return false, errorf(http.StatusInternalServerError, "the container of pod %s exited with code %d before it ran: %s", p.Name, code, podState(p))
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
				return false, errorf(http.StatusInternalServerError, "image %q cannot run in pod %s: %s: %s", image, p.Name, w.Reason, w.Message)
			}
		}
		last = podState(p)
		return false, nil
	})
	if err != nil && ctx.Err() != nil {
		return nil, errorf(http.StatusGatewayTimeout, "pod %s did not run within %s: %s", pod.Name, s.StartTimeout, last)
	}
	return running, err
}

// podState is what p waits for, for errors: its phase, why it is not scheduled, why
// its container waits.
func podState(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			parts = append(parts, fmt.Sprintf("not scheduled: %s: %s", c.Reason, c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("container waiting: %s: %s", w.Reason, w.Message))
		}
		if t := cs.State.Terminated; t != nil {
			parts = append(parts, fmt.Sprintf("container terminated: %s: %s", t.Reason, t.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// wait holds until the instance's container terminated (done, with its exit code;
// ExitCodeGone when its pod is or goes away) or s.WaitPoll passed (not done). Once it
// has read an exit it deletes the pod: nothing reads an exited instance's pod again
// (workerd starts a new one), and the exit stays in s.exits for Stop and Wait.
func (s *Server) wait(ctx context.Context, ns string, req InstanceRequest) (int, bool, error) {
	key := instanceKey(ns, req)
	pctx, cancel := context.WithTimeout(ctx, s.WaitPoll)
	defer cancel()
	code, done := 0, false
	var exited *corev1.Pod
	err := s.watchPod(pctx, key, func(p *corev1.Pod) (bool, error) {
		if p == nil {
			code, done = ExitCodeGone, true
			if c, ok := s.exits.lookup(key.String(), time.Now()); ok {
				code = c
			}
			return true, nil
		}
		if !isInstance(p, req.ShardPod, req.Name) {
			return false, errorf(http.StatusNotFound, "pod %s is not container instance %s of shard %s", p.Name, req.Name, req.ShardPod)
		}
		if code, done = podExited(p, podcontract.ContainerInstanceContainer); done {
			exited = p
		}
		return done, nil
	})
	if err != nil && pctx.Err() != nil && ctx.Err() == nil {
		return 0, false, nil
	}
	if done {
		logFrom(ctx).Info("container instance exited", "name", req.Name, "shardPod", req.ShardPod, "exitCode", code)
	}
	if exited != nil {
		s.exits.record(key.String(), code, time.Now())
		err := s.Client.Delete(context.WithoutCancel(ctx), exited, client.GracePeriodSeconds(0), client.Preconditions{UID: &exited.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			logFrom(ctx).Error(err, "deleting the pod of an exited container instance", "pod", exited.Name)
		}
	}
	return code, done, err
}

// stop deletes the instance's pod with the request's grace period, at most
// maxGraceSeconds.
func (s *Server) stop(ctx context.Context, ns string, req InstanceRequest) error {
	if req.GraceSeconds < 0 {
		return errorf(http.StatusBadRequest, "graceSeconds %d: must not be negative", req.GraceSeconds)
	}
	grace := min(req.GraceSeconds, maxGraceSeconds)
	p, err := s.getInstance(ctx, ns, req)
	switch {
	case err != nil:
		return err
	case p == nil:
		if _, ok := s.exits.lookup(instanceKey(ns, req).String(), time.Now()); ok {
			return errorf(http.StatusConflict, "container instance %s is not running", req.Name)
		}
		return errorf(http.StatusNotFound, "no container instance %s of shard %s", req.Name, req.ShardPod)
	case p.DeletionTimestamp != nil:
		return nil
	}
	if _, exited := podExited(p, podcontract.ContainerInstanceContainer); exited {
		return errorf(http.StatusConflict, "container instance %s is not running", req.Name)
	}
	err = s.Client.Delete(ctx, p, client.GracePeriodSeconds(grace), client.Preconditions{UID: &p.UID})
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	s.event(ctx, p, nil, corev1.EventTypeNormal, "ContainerStopped", "StopContainer",
		fmt.Sprintf("stopping container instance %s of shard %s: pod %s deleted with a grace period of %d s", req.Name, req.ShardPod, p.Name, grace))
	return nil
}

// remove deletes the instance's pod at once and waits until it is gone.
func (s *Server) remove(ctx context.Context, ns string, req InstanceRequest) error {
	s.exits.forget(instanceKey(ns, req).String())
	p, err := s.getInstance(ctx, ns, req)
	if err != nil || p == nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, DefaultRemoveTimeout)
	defer cancel()
	if err := s.deleteAndWait(rctx, p); err != nil {
		return err
	}
	s.event(ctx, p, nil, corev1.EventTypeNormal, "ContainerRemoved", "RemoveContainer",
		fmt.Sprintf("removed container instance %s of shard %s (pod %s)", req.Name, req.ShardPod, p.Name))
	return nil
}

// deleteAndWait deletes p with no grace period and waits until it is gone.
func (s *Server) deleteAndWait(ctx context.Context, p *corev1.Pod) error {
	err := s.Client.Delete(ctx, p, client.GracePeriodSeconds(0), client.Preconditions{UID: &p.UID})
	// A failed precondition (409) means the pod of that name is another one already.
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return err
	}
	err = s.watchPod(ctx, client.ObjectKeyFromObject(p), func(live *corev1.Pod) (bool, error) {
		return live == nil || live.UID != p.UID, nil
	})
	if err != nil && ctx.Err() != nil {
		return errorf(http.StatusGatewayTimeout, "pod %s is still there after it was deleted: %s", p.Name, podState(p))
	}
	return err
}

// watchPod calls cond with the pod at key (nil when there is none) as it is now and
// after each change, until cond is done or fails or ctx ends. It reads and watches the
// API server directly.
func (s *Server) watchPod(ctx context.Context, key types.NamespacedName, cond func(*corev1.Pod) (bool, error)) error {
	for {
		p := &corev1.Pod{}
		err := s.Client.Get(ctx, key, p)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err != nil {
			p = nil
		}
		if done, err := cond(p); done || err != nil {
			return err
		}
		rv := ""
		if p != nil {
			rv = p.ResourceVersion
		}
		if done, err := s.watchFrom(ctx, key, rv, cond); done || err != nil {
			return err
		}
		select { // the watch ended (expired, closed): read again
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchFrom watches the pod at key from resourceVersion rv until cond is done or
// fails, or the watch ends (not done, no error).
func (s *Server) watchFrom(ctx context.Context, key types.NamespacedName, rv string, cond func(*corev1.Pod) (bool, error)) (bool, error) {
	w, err := s.Client.Watch(ctx, &corev1.PodList{}, &client.ListOptions{Namespace: key.Namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name), Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false, nil
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if ev.Type == watch.Deleted {
				p = nil
			} else if !isPod {
				continue
			}
			if done, err := cond(p); done || err != nil {
				return done, err
			}
		}
	}
}
