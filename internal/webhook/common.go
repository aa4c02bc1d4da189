package webhook

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/duration"
)

// WarnFraction is the share of a limit from which a value is admitted with a warning.
const WarnFraction = 0.9

// check collects errors and warnings for one object under one profile.
type check struct {
	t       *limits.Table
	p       limits.Profile
	errs    field.ErrorList
	dropped int
	warns   admission.Warnings
}

// MaxErrors is how many errors a refusal lists: an object with thousands of bad items
// gets the first ones and a count of the rest, in time (the message is built by
// concatenation, quadratic in its length), as the API server's own validation bounds
// what it reports.
const MaxErrors = 100

// check collects at most MaxErrors errors; dropped counts the others.
func (c *check) add(err *field.Error) {
	if err == nil {
		return
	}
	if len(c.errs) >= MaxErrors {
		c.dropped++
		return
	}
	c.errs = append(c.errs, err)
}

func (c *check) warn(format string, args ...any) {
	c.warns = append(c.warns, fmt.Sprintf(format, args...))
}

// limit returns limit n as the table sees it (custom ceilings applied; l.Cite(c.p)
// cites the operator's ceiling only under the custom profile).
func (c *check) limit(n limits.Name) limits.Limit {
	l, ok := c.t.Limit(n)
	if !ok {
		panic("webhook: unknown limit " + string(n))
	}
	return l
}

// atMost checks v ≤ the value of limit n under the profile: it returns the error that
// names field, value, maximum, unit, profile, limit and source, and warns at ≥ 90 %.
func (c *check) atMost(path *field.Path, v int64, n limits.Name) *field.Error {
	return atMost(c, path, v, n)
}

func atMost(c *check, path *field.Path, v int64, n limits.Name) *field.Error {
	l := c.limit(n)
	max := c.t.Get(c.p, n)
	if v > max {
		return field.Invalid(path, v, fmt.Sprintf("must be at most %d %s (%s)", max, l.Unit, l.Cite(c.p)))
	}
	if max > 0 && float64(v) >= WarnFraction*float64(max) && !isDefault(c, v, n) {
		c.warn("%s: %d is %d%% of the limit %d %s (%s)", path, v, int64(math.Floor(100*float64(v)/float64(max))), max, l.Unit, l.Cite(c.p))
	}
	return nil
}

// defaultedBy names, for each limit whose field the defaulters fill in, the limit
// holding the value they write (the limit itself when they write the maximum).
var defaultedBy = map[limits.Name]limits.Name{
	limits.CPUMs: limits.CPUMsDefault, limits.Subrequests: limits.SubrequestsDefault, limits.MemoryMiB: limits.MemoryMiBDefault,
	limits.WorkflowSteps:     limits.WorkflowStepsDefault,
	limits.ChannelsPerObject: limits.ChannelsPerObject, limits.SubscribersPerChannel: limits.SubscribersPerChannel,
	limits.ChannelMessageBytes: limits.ChannelMessageBytes, limits.ChannelBacklogBytes: limits.ChannelBacklogBytes,
}

// isDefault reports whether v is the value the defaulter writes for limit n under the
// profile. Such a value draws no "near the limit" warning: the validator cannot tell it
// from one the user wrote, and warning about a default (memoryMiB 128 is the paid
// maximum) would warn on every object that sets nothing.
func isDefault(c *check, v int64, n limits.Name) bool {
	d, ok := defaultedBy[n]
	return ok && v == defaultValue(c.t, c.p, d, n)
}

// invalid returns the *field.Error for value v of path violating limit n (a size or
// count computed from the object rather than a field value).
func (c *check) tooMany(path *field.Path, got int64, n limits.Name, what string) *field.Error {
	l := c.limit(n)
	max := c.t.Get(c.p, n)
	if got > max {
		return field.Invalid(path, got, fmt.Sprintf("%s must be at most %d %s (%s)", what, max, l.Unit, l.Cite(c.p)))
	}
	if max > 0 && float64(got) >= WarnFraction*float64(max) {
		c.warn("%s: %s is %d %s, %d%% of the limit %d %s (%s)", path, what, got, l.Unit, int64(math.Floor(100*float64(got)/float64(max))), max, l.Unit, l.Cite(c.p))
	}
	return nil
}

// result turns the collected errors into the validator's return values: an
// apierrors.NewInvalid for kind/name, so the API server's message lists each field.
func (c *check) result(kind, name string) (admission.Warnings, error) {
	if len(c.errs) == 0 {
		return c.warns, nil
	}
	errs := c.errs
	if c.dropped > 0 {
		errs = append(errs[:len(errs):len(errs)], field.Forbidden(field.NewPath("spec"),
			fmt.Sprintf("%d more errors not listed (the first %d are); correct these and submit again", c.dropped, MaxErrors)))
	}
	return c.warns, apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: kind}, name, errs)
}

// validateDuration checks a duration field: well-formed, and within [min, limit n].
// zero is nil when 0 is allowed, else why it is not and the source, e.g. "a step
// attempt with timeout 0 can never succeed; source: ...".
func (c *check) validateDuration(path *field.Path, s string, zero *string, n limits.Name) *field.Error {
	if s == "" {
		return nil
	}
	ms, err := duration.Parse(s)
	if err != nil {
		return field.Invalid(path, s, err.Error()+" (source: "+limits.DocWorkflowsAPI+")")
	}
	if ms == 0 && zero != nil {
		return field.Invalid(path, s, "must be greater than 0 ("+*zero+")")
	}
	l := c.limit(n)
	max := c.t.Get(c.p, n)
	if ms > max {
		return field.Invalid(path, s, fmt.Sprintf("must be at most %s (%d ms) (%s)", duration.Format(max), max, l.Cite(c.p)))
	}
	return nil
}

// referenceObject returns the object a reference check reads for kind gvk: the typed
// object for the kinds the controllers cache typed (Worker, DurableObjectNamespace,
// ConfigMap), metav1.PartialObjectMetadata for the others (Workflow, Secret), so no
// Secret data is read or cached.
func referenceObject(gvk schema.GroupVersionKind) client.Object {
	switch gvk {
	case gvkWorker:
		return &v1alpha1.Worker{}
	case gvkDON:
		return &v1alpha1.DurableObjectNamespace{}
	case gvkConfigMap:
		return &corev1.ConfigMap{}
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// referenceObjects lists one object per kind the reference and policy checks read from
// the manager's cache (ConfigMaps and Secrets are read live: uncached).
func referenceObjects() []client.Object {
	var out []client.Object
	for _, gvk := range []schema.GroupVersionKind{gvkWorker, gvkDON, gvkWorkflow, gvkR2Bucket, gvkNamespace} {
		out = append(out, referenceObject(gvk))
	}
	return out
}

// CacheReadTimeout bounds a reference check's read from the cache (which waits for an
// informer that has not synced yet) before it falls back to the live reader.
const CacheReadTimeout = time.Second

// get reads ns/name into obj from opts.Reader; a NotFound or any other error is
// confirmed with opts.LiveReader when set (the cache may lag a just-created object or
// not be synced yet).
func (w *Webhooks) get(ctx context.Context, ns, name string, obj client.Object) error {
	key := types.NamespacedName{Namespace: ns, Name: name}
	if w.opts.LiveReader == nil {
		return w.opts.Reader.Get(ctx, key, obj)
	}
	if uncached(obj) {
		return w.opts.LiveReader.Get(ctx, key, obj)
	}
	// A cache read waits for its informer to sync; bound that wait so an informer that
	// cannot sync (e.g. list/watch not granted) costs a live read, not the request.
	cctx, cancel := context.WithTimeout(ctx, CacheReadTimeout)
	err := w.opts.Reader.Get(cctx, key, obj)
	cancel()
	if err != nil {
		err = w.opts.LiveReader.Get(ctx, key, obj)
	}
	return err
}

// uncached reports whether obj is a ConfigMap or a Secret: the manager's cache holds
// only the operator's labelled ones (controller.CacheOptions), so a Worker's reference
// would always miss it.
func uncached(obj client.Object) bool {
	switch o := obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret:
		return true
	case *metav1.PartialObjectMetadata:
		gvk := o.GroupVersionKind()
		return gvk == gvkConfigMap || gvk == gvkSecret
	}
	return false
}

// exists reports whether the object kind/ns/name exists. Lookup errors other than
// NotFound are returned.
func (w *Webhooks) exists(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (bool, error) {
	err := w.get(ctx, ns, name, referenceObject(gvk))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// reference warns when a referenced object does not exist (yet): GitOps may apply it
// later, and the controllers report it in status.
func (w *Webhooks) reference(ctx context.Context, c *check, path *field.Path, gvk schema.GroupVersionKind, ns, name string) {
	ok, err := w.exists(ctx, gvk, ns, name)
	switch {
	case err != nil:
		c.warn("%s: could not check %s %s/%s: %v", path, gvk.Kind, ns, name, err)
	case !ok:
		c.warn("%s: %s %s/%s does not exist yet; it is admitted, and the controller reports it in status until it exists", path, gvk.Kind, ns, name)
	}
}

var (
	gvkWorker    = v1alpha1.GroupVersion.WithKind("Worker")
	gvkWorkflow  = v1alpha1.GroupVersion.WithKind("Workflow")
	gvkDON       = v1alpha1.GroupVersion.WithKind("DurableObjectNamespace")
	gvkR2Bucket  = v1alpha1.GroupVersion.WithKind("R2Bucket")
	gvkSecret    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	gvkConfigMap = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvkNamespace = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// referenceGVK maps the kind of object a binding references (v1alpha1.Binding.Reference)
// to its GroupVersionKind.
var referenceGVK = map[string]schema.GroupVersionKind{
	v1alpha1.ReferenceSecret:                 gvkSecret,
	v1alpha1.ReferenceWorker:                 gvkWorker,
	v1alpha1.ReferenceDurableObjectNamespace: gvkDON,
	v1alpha1.ReferenceWorkflow:               gvkWorkflow,
	v1alpha1.ReferenceKVNamespace:            v1alpha1.GroupVersion.WithKind("KVNamespace"),
	v1alpha1.ReferenceD1Database:             v1alpha1.GroupVersion.WithKind("D1Database"),
	v1alpha1.ReferenceQueue:                  v1alpha1.GroupVersion.WithKind("Queue"),
	v1alpha1.ReferenceR2Bucket:               gvkR2Bucket,
}

// workerProfile returns the limit profile of Worker ns/name, the operator's default
// when it sets none; found is false when the Worker does not exist (yet).
func (w *Webhooks) workerProfile(ctx context.Context, ns, name string) (p limits.Profile, found bool, err error) {
	var wk v1alpha1.Worker
	if err := w.get(ctx, ns, name, &wk); err != nil {
		if apierrors.IsNotFound(err) {
			return w.opts.DefaultProfile, false, nil
		}
		return w.opts.DefaultProfile, false, err
	}
	return w.profileOf(wk.Spec.Limits), true, nil
}

func (w *Webhooks) profileOf(l *v1alpha1.WorkerLimits) limits.Profile {
	if l == nil || l.Profile == "" {
		return w.opts.DefaultProfile
	}
	p, err := limits.ParseProfile(string(l.Profile))
	if err != nil {
		return w.opts.DefaultProfile
	}
	return p
}

// profileFromWorker is workerProfile for objects that run under a Worker's profile
// (Workflow, DurableObjectNamespace); it warns when the Worker is missing and uses
// the operator's default profile.
func (w *Webhooks) profileFromWorker(ctx context.Context, c *check, path *field.Path, ns, name string) limits.Profile {
	p, found, err := w.workerProfile(ctx, ns, name)
	switch {
	case err != nil:
		c.warn("%s: could not read Worker %s/%s (%v); checking against the default profile %q", path, ns, name, err, p)
	case !found:
		c.warn("%s: Worker %s/%s does not exist yet; it is admitted and checked against the default profile %q, and the controller reports it in status until it exists", path, ns, name, p)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// defaultValue returns the value of default limit def under profile p, lowered to the
// profile's ceiling max when an operator set a lower custom ceiling.
func defaultValue(t *limits.Table, p limits.Profile, def, max limits.Name) int64 {
	d, m := t.Get(p, def), t.Get(p, max)
	if d > m {
		return m
	}
	return d
}
