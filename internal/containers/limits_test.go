package containers

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestWaitDeletesExitedPod: once Wait has read an exit the pod goes, and the exit is
// still what Wait and Stop answer for that instance.
func TestWaitDeletesExitedPod(t *testing.T) {
	ctx := context.Background()
	d := hostileDONS(1)
	shard := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rooms-shards-0", UID: "shard-uid"}}
	p := specs.BuildContainerPod(specs.ContainerInstance{DONS: d, ShardPod: shard, Name: "one"}, specs.DefaultOptions())
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: podcontract.ContainerInstanceContainer,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(p).Build()
	s := &Server{Client: c, Log: testr.New(t), WaitPoll: time.Second}
	s.setup()
	req := InstanceRequest{ShardPod: shard.Name, Name: "one"}
	if code, done, err := s.wait(ctx, "team-a", req); err != nil || !done || code != 3 {
		t.Fatalf("wait: %d %v %v; want 3", code, done, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the exited pod is still there after its exit was read: %v", err)
	}
	if code, done, err := s.wait(ctx, "team-a", req); err != nil || !done || code != 3 {
		t.Errorf("second wait: %d %v %v; want the recorded 3", code, done, err)
	}
	if err := s.stop(ctx, "team-a", req); StatusCode(err) != http.StatusConflict {
		t.Errorf("stop after the exit: %v; want 409", err)
	}
	if err := s.remove(ctx, "team-a", req); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := s.wait(ctx, "team-a", req); code != ExitCodeGone {
		t.Errorf("wait after remove: %d; want %d", code, ExitCodeGone)
	}
}

// TestStartRefusesEnvNames: a name the API server would refuse is a 400 naming it.
func TestStartRefusesEnvNames(t *testing.T) {
	for _, name := range []string{"A B", "1X", "Ü"} {
		err := validStart(StartRequest{DurableObjectNamespace: "rooms", Image: "i", ShardPod: "s-0", Name: "n", Env: []string{name + "=v"}})
		if StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), name) {
			t.Errorf("env name %q: %v; want 400 naming it", name, err)
		}
	}
	if err := validStart(StartRequest{DurableObjectNamespace: "rooms", Image: "i", ShardPod: "s-0", Name: "n", Env: []string{"MY_VAR.x-1=$(a)"}}); err != nil {
		t.Errorf("a valid name: %v", err)
	}
}

// TestWaitSlots: a namespace holds at most the cap of Wait calls; others are apart.
func TestWaitSlots(t *testing.T) {
	var w waitSlots
	for range 3 {
		if !w.acquire("a", 3) {
			t.Fatal("refused within the cap")
		}
	}
	if w.acquire("a", 3) || !w.acquire("b", 3) {
		t.Error("the cap is not per namespace")
	}
	w.release("a")
	if !w.acquire("a", 3) {
		t.Error("a released slot is not free again")
	}
}

// TestAuthReadsRefill: once the bucket of reads for unknown namespaces is spent, the
// caller is told to come back (503), and reads resume as time passes.
func TestAuthReadsRefill(t *testing.T) {
	now := time.Unix(1000, 0)
	a := &authenticator{reader: fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build(), ttl: DefaultCATTL, now: func() time.Time { return now }}
	for i := range missingReadBurst {
		if _, err := a.ca(context.Background(), "ns-"+string(rune('a'+i%26))+strings.Repeat("x", i), false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.ca(context.Background(), "one-more", false); StatusCode(err) != http.StatusServiceUnavailable {
		t.Errorf("past the burst: %v; want 503", err)
	}
	now = now.Add(2 * missingReadEvery)
	if _, err := a.ca(context.Background(), "one-more", false); err != nil {
		t.Errorf("after a refill: %v", err)
	}
}
