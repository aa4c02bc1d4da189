package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// PinnedWorkerdVersion is the workerd the operator runs when a Worker names none
// (hack/install-workerd.sh, Makefile WORKERD_VERSION). Its middle field is the newest
// compatibility date it supports.
const PinnedWorkerdVersion = podcontract.WorkerdVersion

// Script-size rule generations (limits.ScriptSizeBytes vs limits.ScriptSize2024*).
const (
	ScriptSizeRules2026 = "2026-05" // 64 MiB uncompressed, no compressed limit (default)
	ScriptSizeRules2024 = "2024-11" // 64 MB uncompressed and 3 MiB (Free) / 10 MiB (Paid) gzip
)

// Options configure the webhooks. The zero value is usable.
type Options struct {
	// Limits is the limit table; nil means limits.Default(). Load the operator's
	// custom ceilings with limits.LoadCustomFile.
	Limits *limits.Table
	// DefaultProfile applies to Workers without spec.limits.profile; "" means paid.
	DefaultProfile limits.Profile
	// WorkerdVersion is the operator's pinned workerd, "1.YYYYMMDD.N"; "" means
	// PinnedWorkerdVersion. A Worker's compatibilityDate may not be after the newest
	// date it supports (SupportedCompatibilityDate; that of spec.runtime.version when
	// set).
	WorkerdVersion string
	// ScriptSizeRules is ScriptSizeRules2026 (default, "") or ScriptSizeRules2024.
	ScriptSizeRules string
	// Reader reads referenced objects: Workers, DurableObjectNamespaces and
	// ConfigMaps as typed objects, Workflows and Secrets as metav1.PartialObjectMetadata
	// (existence only; never a Secret's data). SetupWebhooks sets it to the manager's
	// cached client, whose informers the controllers share (typed Workers,
	// DurableObjectNamespaces and ConfigMaps; metadata-only Secrets).
	Reader client.Reader
	// LiveReader, when set, confirms what Reader cannot answer: a NotFound (an informer
	// lags a just-created object by milliseconds) or any other error (cache not started,
	// or not synced within CacheReadTimeout) is retried with it. SetupWebhooks sets it to the manager's
	// uncached API reader; nil means Reader's answer is final.
	LiveReader client.Reader
	// Policy is what the cluster admin lets Worker authors put into pods
	// (docs/security-policy.md); the zero value is the strictest.
	Policy Policy
}

func (o Options) withDefaults() Options {
	if o.Limits == nil {
		o.Limits = limits.Default()
	}
	if o.DefaultProfile == "" {
		o.DefaultProfile = limits.DefaultProfile
	}
	if o.WorkerdVersion == "" {
		o.WorkerdVersion = PinnedWorkerdVersion
	}
	if o.ScriptSizeRules == "" {
		o.ScriptSizeRules = ScriptSizeRules2026
	}
	o.Policy = o.Policy.withDefaults(o.DefaultProfile)
	return o
}

// PinnedSupportedCompatibilityDate is the newest compatibility date the pinned
// workerd binary accepts ("the newest date supported by this server binary is ...";
// TestCompatFlagsMatchWorkerd asks it). It is a week past the date in the version.
const PinnedSupportedCompatibilityDate = "2026-11-24"

// SupportedCompatibilityDate returns the newest compatibility date workerd version v
// accepts: PinnedSupportedCompatibilityDate for PinnedWorkerdVersion, else the date in
// the version (NewestCompatibilityDate, which may be a few days short).
// Errors: as NewestCompatibilityDate.
func SupportedCompatibilityDate(v string) (string, error) {
	if v == PinnedWorkerdVersion {
		return PinnedSupportedCompatibilityDate, nil
	}
	return NewestCompatibilityDate(v)
}

var workerdVersionRE = regexp.MustCompile(`^[0-9]+\.([0-9]{4})([0-9]{2})([0-9]{2})\.[0-9]+$`)

// NewestCompatibilityDate returns the newest compatibility date workerd version v
// ("1.20261117.1") supports, as "2026-11-17". Errors: v not of that shape.
func NewestCompatibilityDate(v string) (string, error) {
	m := workerdVersionRE.FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("workerd version %q is not of the form 1.YYYYMMDD.N", v)
	}
	d := m[1] + "-" + m[2] + "-" + m[3]
	if _, err := time.Parse(time.DateOnly, d); err != nil {
		return "", fmt.Errorf("workerd version %q: %s is not a date", v, d)
	}
	return d, nil
}

// Webhooks holds the defaulters and validators of the four kinds, sharing Options.
type Webhooks struct {
	opts Options
}

// New returns the webhooks for opts. opts.Reader must be set (SetupWebhooks sets it to
// the manager's cached client and LiveReader to its API reader). Errors: a malformed WorkerdVersion or ScriptSizeRules.
func New(opts Options) (*Webhooks, error) {
	opts = opts.withDefaults()
	if _, err := NewestCompatibilityDate(opts.WorkerdVersion); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if opts.ScriptSizeRules != ScriptSizeRules2026 && opts.ScriptSizeRules != ScriptSizeRules2024 {
		return nil, fmt.Errorf("webhook: script-size rules %q: want %q or %q", opts.ScriptSizeRules, ScriptSizeRules2026, ScriptSizeRules2024)
	}
	if _, err := limits.ParseProfile(string(opts.DefaultProfile)); err != nil {
		return nil, fmt.Errorf("webhook: default profile: %w", err)
	}
	if err := opts.Policy.validate(); err != nil {
		return nil, err
	}
	if opts.Reader == nil {
		return nil, fmt.Errorf("webhook: Options.Reader is nil")
	}
	return &Webhooks{opts: opts}, nil
}

// Webhook paths, as controller-runtime's builder derives them from the GVK.
const (
	MutateWorkerPath                   = "/mutate-fleet-workerd-operator-io-v1alpha1-worker"
	ValidateWorkerPath                 = "/validate-fleet-workerd-operator-io-v1alpha1-worker"
	MutateWorkflowPath                 = "/mutate-fleet-workerd-operator-io-v1alpha1-workflow"
	ValidateWorkflowPath               = "/validate-fleet-workerd-operator-io-v1alpha1-workflow"
	MutateDurableObjectNamespacePath   = "/mutate-fleet-workerd-operator-io-v1alpha1-durableobjectnamespace"
	ValidateDurableObjectNamespacePath = "/validate-fleet-workerd-operator-io-v1alpha1-durableobjectnamespace"
	MutateCronSchedulePath             = "/mutate-fleet-workerd-operator-io-v1alpha1-cronschedule"
	ValidateCronSchedulePath           = "/validate-fleet-workerd-operator-io-v1alpha1-cronschedule"
	ValidateR2BucketPath               = "/validate-fleet-workerd-operator-io-v1alpha1-r2bucket"
)

// The markers below generate config/webhook/manifests.yaml (`make manifests`:
// controller-gen webhook paths=./... output:webhook:artifacts:config=config/webhook).
//
// Each webhook call costs the API server a round trip (about 1 ms on a 2-core machine,
// most of it outside the handler; docs/benchmarks.md), so the patch= of each marker
// adds a matchCondition (CEL, evaluated inside the API server) that skips calls that
// cannot change the outcome:
//   - mutating, "missing-default": called only when a field its defaulter writes is
//     absent (or "" for string fields, as the defaulter tests). Objects that carry every
//     default — updates, GitOps re-applies of complete manifests — skip the call. The
//     expression must list exactly the fields Default sets; TestMatchConditions fails
//     for a defaulted field the expression misses.
//   - validating, "create-or-spec-changed": an UPDATE that leaves spec unchanged
//     (labels, annotations, finalizers) is not validated again: validation reads only
//     spec (and the immutable namespace), and a metadata update — such as a controller
//     removing its finalizer — must not be rejected because a referenced Worker or the
//     operator's ceilings changed since the spec was admitted.
//
// +kubebuilder:webhook:path=/mutate-fleet-workerd-operator-io-v1alpha1-worker,mutating=true,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=workers,verbs=create;update,versions=v1alpha1,name=mworker.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"missing-default","expression":"!has(object.spec) || !has(object.spec.limits) || !has(object.spec.limits.profile) || object.spec.limits.profile == '' || !has(object.spec.limits.cpuMs) || !has(object.spec.limits.subrequests) || ((!has(object.spec.replicas) || !has(object.spec.limits.memoryMiB)) && !(has(object.spec.dispatchNamespace) && has(object.spec.dispatchPlacement) && object.spec.dispatchPlacement == 'Shared'))"}]}`
// +kubebuilder:webhook:path=/validate-fleet-workerd-operator-io-v1alpha1-worker,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=workers,verbs=create;update,versions=v1alpha1,name=vworker.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"create-or-spec-changed","expression":"request.operation != 'UPDATE' || !has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/mutate-fleet-workerd-operator-io-v1alpha1-workflow,mutating=true,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=workflows,verbs=create;update,versions=v1alpha1,name=mworkflow.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"missing-default","expression":"!has(object.spec) || !has(object.spec.limits) || !has(object.spec.limits.steps) || !has(object.spec.defaults) || !has(object.spec.defaults.timeout) || object.spec.defaults.timeout == '' || !has(object.spec.defaults.retries) || !has(object.spec.defaults.retries.limit) || !has(object.spec.defaults.retries.delay) || object.spec.defaults.retries.delay == '' || !has(object.spec.defaults.retries.backoff) || object.spec.defaults.retries.backoff == ''"}]}`
// +kubebuilder:webhook:path=/validate-fleet-workerd-operator-io-v1alpha1-workflow,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=workflows,verbs=create;update,versions=v1alpha1,name=vworkflow.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"create-or-spec-changed","expression":"request.operation != 'UPDATE' || !has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/mutate-fleet-workerd-operator-io-v1alpha1-durableobjectnamespace,mutating=true,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=durableobjectnamespaces,verbs=create;update,versions=v1alpha1,name=mdurableobjectnamespace.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"missing-default","expression":"!has(object.spec) || !has(object.spec.shards) || (has(object.spec.channels) && (!has(object.spec.channels.binding) || object.spec.channels.binding == '' || !has(object.spec.channels.maxChannels) || !has(object.spec.channels.maxSubscribers) || !has(object.spec.channels.maxMessageBytes) || !has(object.spec.channels.maxBacklogBytes)))"}]}`
// +kubebuilder:webhook:path=/validate-fleet-workerd-operator-io-v1alpha1-durableobjectnamespace,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=durableobjectnamespaces,verbs=create;update,versions=v1alpha1,name=vdurableobjectnamespace.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"create-or-spec-changed","expression":"request.operation != 'UPDATE' || !has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/mutate-fleet-workerd-operator-io-v1alpha1-cronschedule,mutating=true,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=cronschedules,verbs=create;update,versions=v1alpha1,name=mcronschedule.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"missing-default","expression":"!has(object.spec) || !has(object.spec.concurrencyPolicy) || object.spec.concurrencyPolicy == '' || !has(object.spec.historyLimit)"}]}`
// +kubebuilder:webhook:path=/validate-fleet-workerd-operator-io-v1alpha1-cronschedule,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=cronschedules,verbs=create;update,versions=v1alpha1,name=vcronschedule.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"create-or-spec-changed","expression":"request.operation != 'UPDATE' || !has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/validate-fleet-workerd-operator-io-v1alpha1-r2bucket,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.workerd-operator.io,resources=r2buckets,verbs=create;update,versions=v1alpha1,name=vr2bucket.fleet.workerd-operator.io,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"create-or-spec-changed","expression":"request.operation != 'UPDATE' || !has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec"}]}`
//
// The validator reads referenced objects (existence checks, ConfigMap script size):
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=workers;workflows;durableobjectnamespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch
// and the namespace's limit-profile label (policy.go):
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// SetupWebhooks registers the defaulting and validating webhooks of the four kinds on
// mgr's webhook server. When opts.Reader is nil, reference checks read the manager's
// cache (informers registered here: typed Workers and DurableObjectNamespaces, which
// the controllers watch anyway; metadata-only Workflows and Namespaces) and confirm a
// miss with the uncached API reader; ConfigMaps and Secrets, of which the cache holds
// only the operator's labelled ones, are read with the API reader alone. Validators go through controller-runtime's builder
// (ctrl.NewWebhookManagedBy(mgr, &v1alpha1.Worker{}).WithValidator(...)); defaulters
// are registered on the same paths the builder would use, with the add-only handler
// (see the package comment). Errors: invalid opts.
func SetupWebhooks(mgr ctrl.Manager, opts Options) error {
	if opts.Reader == nil {
		opts.Reader = mgr.GetClient()
		if opts.LiveReader == nil {
			opts.LiveReader = mgr.GetAPIReader()
		}
		// Register the informers of the referenced kinds now, so they start and sync
		// with the manager's cache instead of on the first admission request. Never
		// wait for a sync here (SetupWebhooks may run after the manager started, e.g.
		// once cert-controller has a certificate); until an informer has synced, a
		// read of its kind falls back to LiveReader.
		for _, o := range referenceObjects() {
			if _, err := mgr.GetCache().GetInformer(context.Background(), o, cache.BlockUntilSynced(false)); err != nil {
				return fmt.Errorf("webhook: informer for %T: %w", o, err)
			}
		}
	}
	w, err := New(opts)
	if err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.Worker{}).WithValidator(w.WorkerValidator()).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.Workflow{}).WithValidator(w.WorkflowValidator()).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.DurableObjectNamespace{}).WithValidator(w.DurableObjectNamespaceValidator()).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.CronSchedule{}).WithValidator(w.CronScheduleValidator()).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.R2Bucket{}).WithValidator(w.R2BucketValidator()).Complete(); err != nil {
		return err
	}
	srv := mgr.GetWebhookServer()
	scheme := mgr.GetScheme()
	srv.Register(MutateWorkerPath, &webhook.Admission{Handler: AddOnlyDefaulter[*v1alpha1.Worker](scheme, w.WorkerDefaulter())})
	srv.Register(MutateWorkflowPath, &webhook.Admission{Handler: AddOnlyDefaulter[*v1alpha1.Workflow](scheme, w.WorkflowDefaulter())})
	srv.Register(MutateDurableObjectNamespacePath, &webhook.Admission{Handler: AddOnlyDefaulter[*v1alpha1.DurableObjectNamespace](scheme, w.DurableObjectNamespaceDefaulter())})
	srv.Register(MutateCronSchedulePath, &webhook.Admission{Handler: AddOnlyDefaulter[*v1alpha1.CronSchedule](scheme, w.CronScheduleDefaulter())})
	return nil
}

// AddOnlyDefaulter returns an admission handler that runs d on the decoded object and
// answers with a JSON patch holding only "add" operations: the difference between the
// typed object before and after d.Default, applied to the object as received. Fields
// the Go types do not know, and values Go would re-encode differently (quantities),
// are left exactly as the user wrote them. A defaulter that changes or removes a value
// is a programming error and gets HTTP 500.
func AddOnlyDefaulter[T runtime.Object](scheme *runtime.Scheme, d admission.Defaulter[T]) admission.Handler {
	return &addOnly[T]{d: d, decoder: admission.NewDecoder(scheme)}
}

type addOnly[T runtime.Object] struct {
	d       admission.Defaulter[T]
	decoder admission.Decoder
}

func (h *addOnly[T]) newT() T {
	var zero T
	return reflect.New(reflect.TypeOf(zero).Elem()).Interface().(T)
}

// Handle implements admission.Handler.
func (h *addOnly[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Delete || req.Operation == admissionv1.Connect {
		return admission.Allowed("")
	}
	ctx = admission.NewContextWithRequest(ctx, req)
	// The API server calls mutating webhooks before it validates the object against
	// the CRD schema. An object without a spec object, or one the Go types cannot
	// hold (a string where an integer belongs, a number beyond int32), is left
	// unchanged for that validation, whose error names the field and the rule: a
	// Go decoding error names neither, and a patch under an absent /spec cannot be
	// applied (the API server answers 500). The schema rejects every such object,
	// and the validating webhook still decodes whatever it lets through.
	if !specIsObject(req.Object.Raw) {
		return admission.Allowed("spec is not an object; left to the API server's schema validation")
	}
	obj := h.newT()
	if err := h.decoder.DecodeRaw(req.Object, obj); err != nil {
		return admission.Allowed("not decodable into the Go types (" + err.Error() + "); left to the API server's schema validation")
	}
	before, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if err := h.d.Default(ctx, obj); err != nil {
		return admission.Denied(err.Error())
	}
	after, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	ops, err := AddOnlyPatch(before, after)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("defaulted", ops...)
}

// specIsObject reports whether the JSON object raw has a "spec" member that is a JSON
// object.
func specIsObject(raw []byte) bool {
	var top struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return false
	}
	b := bytes.TrimSpace(top.Spec)
	return len(b) > 0 && b[0] == '{'
}

// AddOnlyPatch returns the JSON patch from before to after, which must consist of
// "add" operations only. Errors: malformed JSON, or any replace/remove/move operation
// (the defaulter changed a value instead of adding one).
func AddOnlyPatch(before, after []byte) ([]jsonpatch.JsonPatchOperation, error) {
	ops, err := jsonpatch.CreatePatch(before, after)
	if err != nil {
		return nil, err
	}
	// jsonpatch walks maps; sort so the patch is deterministic (the adds are disjoint).
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	for _, op := range ops {
		if op.Operation != "add" {
			return nil, fmt.Errorf("webhook: defaulter produced a %q operation on %s; defaulting may only add fields", op.Operation, op.Path)
		}
	}
	return ops, nil
}
