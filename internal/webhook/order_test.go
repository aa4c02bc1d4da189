package webhook

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// TestDefaultsBeforeTheirWorker applies a Workflow and a DurableObjectNamespace before
// the Worker they run under (GitOps applies in any order), then that Worker with a
// profile whose ceilings are lower than the default profile's, then a spec update of
// each. The profile-dependent defaults (spec.limits.steps; spec.channels.max*) must
// not be written from the default profile while the Worker is missing: they would
// stay, and the first spec update after the Worker exists would be rejected for a
// value the user never wrote (or the sidecar would refuse it at start-up). They are
// written, under the Worker's profile, by the first update after it exists.
func TestDefaultsBeforeTheirWorker(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		profile limits.Profile
		obj     client.Object
		unset   func(client.Object) bool // the profile-dependent defaults are absent
		change  func(client.Object)      // a spec change
		got     func(client.Object) int64
		def     limits.Name // the default limit whose value got must be, under profile,
		max     limits.Name // lowered to this ceiling (defaultValue)
	}{
		{"workflow", limits.Free,
			newWorkflow("early-wf", limits.Free, func(s *v1alpha1.WorkflowSpec) { s.WorkerRef.Name = "late-free" }),
			func(o client.Object) bool { l := o.(*v1alpha1.Workflow).Spec.Limits; return l == nil || l.Steps == nil },
			func(o client.Object) { o.(*v1alpha1.Workflow).Spec.ClassName = "Flow2" },
			func(o client.Object) int64 { return int64(*o.(*v1alpha1.Workflow).Spec.Limits.Steps) },
			limits.WorkflowStepsDefault, limits.WorkflowSteps},
		{"durable-object-namespace", limits.Custom,
			newDON("early-don", limits.Custom, func(s *v1alpha1.DurableObjectNamespaceSpec) {
				s.WorkerRef.Name = "late-custom"
				s.Channels = &v1alpha1.ChannelsSpec{Enabled: true}
			}),
			func(o client.Object) bool {
				return o.(*v1alpha1.DurableObjectNamespace).Spec.Channels.MaxChannels == nil
			},
			func(o client.Object) { o.(*v1alpha1.DurableObjectNamespace).Spec.PreventEviction = true },
			func(o client.Object) int64 {
				return int64(*o.(*v1alpha1.DurableObjectNamespace).Spec.Channels.MaxChannels)
			},
			limits.ChannelsPerObject, limits.ChannelsPerObject},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := s.c.Create(ctx, c.obj); err != nil {
				t.Fatalf("create before the Worker: %v", err)
			}
			if !c.unset(c.obj) {
				t.Errorf("a profile-dependent default was written while the Worker is missing: %+v", c.obj)
			}
			worker := "late-" + string(c.profile)
			if err := s.c.Create(ctx, newWorker(worker, c.profile, nil)); err != nil {
				t.Fatal(err)
			}
			c.change(c.obj)
			if err := s.c.Update(ctx, c.obj); err != nil {
				t.Fatalf("spec update after the Worker exists: %v", err)
			}
			want := defaultValue(s.table, c.profile, c.def, c.max)
			if got := c.got(c.obj); got != want {
				t.Errorf("after the update: %d, want %d (profile %q of Worker %s)", got, want, c.profile, worker)
			}
		})
	}
}
