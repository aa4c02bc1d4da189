package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// DefaultChannelsBinding is the env name of the channels client when
// spec.channels.binding is unset.
const DefaultChannelsBinding = "CHANNELS"

// DurableObjectNamespaceDefaulter defaults spec.shards (1) and, when spec.channels is
// present, its binding ("CHANNELS") and max* fields (the channel limits of the
// Worker's profile; left unset while that Worker does not exist).
type DurableObjectNamespaceDefaulter struct{ w *Webhooks }

// DurableObjectNamespaceValidator validates a DurableObjectNamespace.
type DurableObjectNamespaceValidator struct{ w *Webhooks }

var (
	_ admission.Defaulter[*v1alpha1.DurableObjectNamespace] = (*DurableObjectNamespaceDefaulter)(nil)
	_ admission.Validator[*v1alpha1.DurableObjectNamespace] = (*DurableObjectNamespaceValidator)(nil)
)

// DurableObjectNamespaceDefaulter returns the DurableObjectNamespace defaulter.
func (w *Webhooks) DurableObjectNamespaceDefaulter() *DurableObjectNamespaceDefaulter {
	return &DurableObjectNamespaceDefaulter{w}
}

// DurableObjectNamespaceValidator returns the DurableObjectNamespace validator.
func (w *Webhooks) DurableObjectNamespaceValidator() *DurableObjectNamespaceValidator {
	return &DurableObjectNamespaceValidator{w}
}

// Default implements admission.Defaulter.
func (d *DurableObjectNamespaceDefaulter) Default(ctx context.Context, o *v1alpha1.DurableObjectNamespace) error {
	s := &o.Spec
	if s.Shards == nil {
		s.Shards = ptr(int32(1))
	}
	if s.Channels == nil {
		return nil
	}
	ch := s.Channels
	if ch.Binding == "" {
		ch.Binding = DefaultChannelsBinding
	}
	if ch.MaxChannels != nil && ch.MaxSubscribers != nil && ch.MaxMessageBytes != nil && ch.MaxBacklogBytes != nil {
		return nil
	}
	// Only under the profile of an existing Worker (see WorkflowDefaulter): a custom
	// Worker's lower ceilings would otherwise reject, and the sidecar refuse, the
	// default profile's values written before it arrived.
	p, found, err := d.w.workerProfile(ctx, o.Namespace, s.WorkerRef.Name)
	if !found || err != nil {
		return nil
	}
	t := d.w.opts.Limits
	set := func(f **int32, n limits.Name) {
		if *f == nil {
			*f = ptr(int32(t.Get(p, n)))
		}
	}
	set(&ch.MaxChannels, limits.ChannelsPerObject)
	set(&ch.MaxSubscribers, limits.SubscribersPerChannel)
	set(&ch.MaxMessageBytes, limits.ChannelMessageBytes)
	set(&ch.MaxBacklogBytes, limits.ChannelBacklogBytes)
	return nil
}

// ValidateCreate implements admission.Validator.
func (v *DurableObjectNamespaceValidator) ValidateCreate(ctx context.Context, o *v1alpha1.DurableObjectNamespace) (admission.Warnings, error) {
	return v.w.ValidateDurableObjectNamespace(ctx, nil, o)
}

// ValidateUpdate implements admission.Validator.
func (v *DurableObjectNamespaceValidator) ValidateUpdate(ctx context.Context, old, o *v1alpha1.DurableObjectNamespace) (admission.Warnings, error) {
	return v.w.ValidateDurableObjectNamespace(ctx, old, o)
}

// ValidateDelete implements admission.Validator; deletes are always allowed.
func (v *DurableObjectNamespaceValidator) ValidateDelete(context.Context, *v1alpha1.DurableObjectNamespace) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDurableObjectNamespace checks o (and, on update, the change from old)
// against the profile of the Worker it belongs to.
func (w *Webhooks) ValidateDurableObjectNamespace(ctx context.Context, old, o *v1alpha1.DurableObjectNamespace) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	c := &check{t: w.opts.Limits}
	c.p = w.profileFromWorker(ctx, c, spec.Child("workerRef", "name"), o.Namespace, o.Spec.WorkerRef.Name)
	validateDONSpec(c, spec, old, o)
	validateContainerPolicy(c, spec.Child("container"), o.Spec.Container, &w.opts.Policy)
	return c.result("DurableObjectNamespace", o.Name)
}

func validateDONSpec(c *check, spec *field.Path, old, o *v1alpha1.DurableObjectNamespace) {
	if o.Spec.Shards != nil {
		c.add(validateMin(spec.Child("shards"), int64(*o.Spec.Shards), 1))
	}
	if ch := o.Spec.Channels; ch != nil {
		cp := spec.Child("channels")
		one := func(name string, v *int32, n limits.Name) {
			if v != nil {
				c.add(validateMin(cp.Child(name), int64(*v), 1))
				c.add(c.atMost(cp.Child(name), int64(*v), n))
			}
		}
		one("maxChannels", ch.MaxChannels, limits.ChannelsPerObject)
		one("maxSubscribers", ch.MaxSubscribers, limits.SubscribersPerChannel)
		one("maxMessageBytes", ch.MaxMessageBytes, limits.ChannelMessageBytes)
		one("maxBacklogBytes", ch.MaxBacklogBytes, limits.ChannelBacklogBytes)
	}
}
