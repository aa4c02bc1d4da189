package specs

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// spec.channels.max* become the shard sidecar's --channel-max-* flags (docs/channels.md
// "Limits"); flag names are the ones cmd/workerd-operator/sidecar.go defines.
func TestChannelLimitArgs(t *testing.T) {
	cases := []struct {
		name string
		in   *fleetv1alpha1.ChannelsSpec
		want []string
	}{
		{"no channels", nil, nil},
		{"disabled with limits", &fleetv1alpha1.ChannelsSpec{MaxChannels: ptr.To[int32](8)}, nil},
		{"enabled, profile limits", &fleetv1alpha1.ChannelsSpec{Enabled: true}, nil},
		{"enabled, all lowered", &fleetv1alpha1.ChannelsSpec{Enabled: true, MaxChannels: ptr.To[int32](8), MaxSubscribers: ptr.To[int32](16),
			MaxMessageBytes: ptr.To[int32](1024), MaxBacklogBytes: ptr.To[int32](4096)},
			[]string{"--channel-max-channels=8", "--channel-max-subscribers=16", "--channel-max-message-bytes=1024", "--channel-max-backlog-bytes=4096"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := channelLimitArgs(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("channelLimitArgs = %q, want %q", got, tc.want)
			}
		})
	}
}

// Shard pods drain their gateway before they stop and have the short shard grace
// period; Worker pods keep the preStop sleep and the Worker's drain.
func TestShardPodsDrainBeforeStopping(t *testing.T) {
	w := fixtureWorker()
	d := &fleetv1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rooms", UID: "uid-2"},
		Spec:       fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Room"},
	}
	opts := DefaultOptions()
	set := BuildDONSChildren(d, w, &render.Output{Version: "v"}, "inputs", opts)
	pod := set.StatefulSet.Spec.Template.Spec
	if g := *pod.TerminationGracePeriodSeconds; g != opts.PreStopSeconds+opts.ShardDrainSeconds {
		t.Errorf("shard grace %d, want %d", g, opts.PreStopSeconds+opts.ShardDrainSeconds)
	}
	hook := pod.Containers[0].Lifecycle.PreStop
	if hook.HTTPGet == nil || hook.HTTPGet.Path != render.GatewayDrainPath || hook.HTTPGet.Port.StrVal != podcontract.HealthPortName {
		t.Errorf("shard preStop %+v, want GET %s on port %s", hook, render.GatewayDrainPath, podcontract.HealthPortName)
	}
	// The health socket drains only with the shard's token (health.js): the hook sends it.
	if h := hook.HTTPGet.HTTPHeaders; len(h) != 1 || h[0].Name != render.DrainTokenHeader || h[0].Value != render.DrainToken(d) || len(h[0].Value) != 32 {
		t.Errorf("shard preStop headers %+v, want %s: the 32-character drain token of the namespace's uid", h, render.DrainTokenHeader)
	}
	wp := build(t, w).Deployment.Spec.Template.Spec
	// A request may wait for a shard being replaced in the same rollout (docs/durable-objects.md "Rollouts").
	if g := *wp.TerminationGracePeriodSeconds; g != opts.PreStopSeconds+120+opts.DrainSeconds || wp.Containers[0].Lifecycle.PreStop.Sleep == nil {
		t.Errorf("worker grace %d preStop %+v", g, wp.Containers[0].Lifecycle.PreStop)
	}
}

// Claim names derive from the object's name only: an object re-created under its name
// (new uid) gets the claims data-<set>-<i> of the one before (Retain keeps them).
func TestClaimNamesStableAcrossRecreation(t *testing.T) {
	w := fixtureWorker()
	out := &render.Output{Version: "v"}
	var sets []string
	for _, uid := range []string{"uid-a", "uid-b"} {
		d := &fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rooms", UID: types.UID(uid)},
			Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Room"}}
		wf := &fleetv1alpha1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders", UID: types.UID(uid)},
			Spec: fleetv1alpha1.WorkflowSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Orders"}}
		ds := BuildDONSChildren(d, w, out, "inputs", DefaultOptions()).StatefulSet
		ws, err := BuildWorkflowChildren(wf, w, out, api.FileConfig{}, "inputs", DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*appsv1.StatefulSet{ds, ws.StatefulSet} {
			sets = append(sets, s.Spec.VolumeClaimTemplates[0].Name+"-"+s.Name+"-0")
		}
	}
	if want := []string{"data-rooms-do-0", "data-orders-wf-0"}; !reflect.DeepEqual(sets[:2], want) || !reflect.DeepEqual(sets[2:], want) {
		t.Fatalf("claims %v, want %v for both uids", sets, want)
	}
}

// A shard's containers are killed for a failed liveness probe only after a minute
// without an answer, each probe waiting 5 s (docs/pod-contract.md "The health socket"):
// a busy or CPU-starved workerd answers its health socket late, and killing it loses
// every call in flight on the only owner of its objects.
func TestShardLivenessToleratesBusyMoments(t *testing.T) {
	w := fixtureWorker()
	d := &fleetv1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rooms", UID: "uid-2"},
		Spec:       fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Room"},
	}
	pod := BuildDONSChildren(d, w, &render.Output{Version: "v"}, "inputs", DefaultOptions()).StatefulSet.Spec.Template.Spec
	probed := 0
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		p := c.LivenessProbe
		if p == nil {
			continue
		}
		probed++
		if p.TimeoutSeconds < 5 || p.PeriodSeconds*p.FailureThreshold < 60 {
			t.Errorf("container %s: liveness timeout %d s, %d failures every %d s: want a kill only after 60 s of probes unanswered for 5 s",
				c.Name, p.TimeoutSeconds, p.FailureThreshold, p.PeriodSeconds)
		}
	}
	if probed != 2 {
		t.Errorf("%d containers with a liveness probe, want 2 (workerd and the sidecar)", probed)
	}
}
