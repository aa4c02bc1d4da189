package webhook

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// WorkerDefaulter defaults a Worker: spec.replicas (1), spec.limits.profile (the
// operator's default profile, lowered to the most permissive one the namespace may
// use), and spec.limits.cpuMs, subrequests and memoryMiB (the
// profile's *_default limits, lowered to the profile's ceiling). It never changes a
// value that is set. A Shared user Worker (Worker.SharedUserWorker) gets neither
// spec.replicas nor spec.limits.memoryMiB: it has no pods of its own, and the validator
// refuses both on it (validateSharedUserWorker).
type WorkerDefaulter struct{ w *Webhooks }

// WorkerValidator validates a Worker (see the package comment).
type WorkerValidator struct{ w *Webhooks }

var (
	_ admission.Defaulter[*v1alpha1.Worker] = (*WorkerDefaulter)(nil)
	_ admission.Validator[*v1alpha1.Worker] = (*WorkerValidator)(nil)
)

// WorkerDefaulter returns the Worker defaulter.
func (w *Webhooks) WorkerDefaulter() *WorkerDefaulter { return &WorkerDefaulter{w} }

// WorkerValidator returns the Worker validator.
func (w *Webhooks) WorkerValidator() *WorkerValidator { return &WorkerValidator{w} }

// Default implements admission.Defaulter.
func (d *WorkerDefaulter) Default(ctx context.Context, wk *v1alpha1.Worker) error {
	s := &wk.Spec
	shared := wk.SharedUserWorker()
	if s.Replicas == nil && !shared {
		s.Replicas = ptr(int32(1))
	}
	if s.Limits == nil {
		s.Limits = &v1alpha1.WorkerLimits{}
	}
	if s.Limits.Profile == "" {
		s.Limits.Profile = v1alpha1.LimitProfile(d.w.defaultProfile(ctx, workerNamespace(ctx, wk)))
	}
	p := d.w.profileOf(s.Limits)
	t := d.w.opts.Limits
	if s.Limits.CPUMs == nil {
		s.Limits.CPUMs = ptr(defaultValue(t, p, limits.CPUMsDefault, limits.CPUMs))
	}
	if s.Limits.Subrequests == nil {
		s.Limits.Subrequests = ptr(defaultValue(t, p, limits.SubrequestsDefault, limits.Subrequests))
	}
	if s.Limits.MemoryMiB == nil && !shared {
		s.Limits.MemoryMiB = ptr(int32(defaultValue(t, p, limits.MemoryMiBDefault, limits.MemoryMiB)))
	}
	return nil
}

// ValidateCreate implements admission.Validator.
func (v *WorkerValidator) ValidateCreate(ctx context.Context, wk *v1alpha1.Worker) (admission.Warnings, error) {
	return v.w.validateWorker(ctx, nil, wk)
}

// ValidateUpdate implements admission.Validator. Besides ValidateWorker's checks, a
// profile change warns about limits that keep the old profile's default (see
// profileChangeWarnings).
func (v *WorkerValidator) ValidateUpdate(ctx context.Context, old, wk *v1alpha1.Worker) (admission.Warnings, error) {
	warns, err := v.w.validateWorker(ctx, old, wk)
	return append(v.w.profileChangeWarnings(old, wk), warns...), err
}

// profileChangeWarnings warns, when an update changes the limit profile, about each of
// spec.limits.cpuMs, subrequests and memoryMiB that is unchanged and equal to the old
// profile's default: the defaulter wrote it (or the user wrote that value), and it
// only adds what is missing, so the new profile's default does not replace it. A
// Worker moved from free to paid would keep 10 ms of CPU; one moved from paid to
// free is rejected for values it never set. The warning names the new default and
// how to get it (remove the field: re-applying a manifest does not, since the field
// was never in it; docs/admission.md).
func (w *Webhooks) profileChangeWarnings(old, cur *v1alpha1.Worker) admission.Warnings {
	op, np := w.profileOf(old.Spec.Limits), w.profileOf(cur.Spec.Limits)
	if op == np || old.Spec.Limits == nil || cur.Spec.Limits == nil {
		return nil
	}
	t := w.opts.Limits
	var out admission.Warnings
	one := func(name string, was, is *int64, def, max limits.Name) {
		if was == nil || is == nil || *was != *is {
			return
		}
		od, nd := defaultValue(t, op, def, max), defaultValue(t, np, def, max)
		if *is == od && od != nd {
			l, _ := limits.Lookup(def)
			out = append(out, fmt.Sprintf("spec.limits.%s: %d is the default of profile %q, kept because defaulting only adds missing fields; profile %q defaults it to %d: remove spec.limits.%s to get that default (limit %s; source: %s)",
				name, *is, op, np, nd, name, def, l.Source))
		}
	}
	i64 := func(v *int32) *int64 {
		if v == nil {
			return nil
		}
		return ptr(int64(*v))
	}
	one("cpuMs", old.Spec.Limits.CPUMs, cur.Spec.Limits.CPUMs, limits.CPUMsDefault, limits.CPUMs)
	one("subrequests", old.Spec.Limits.Subrequests, cur.Spec.Limits.Subrequests, limits.SubrequestsDefault, limits.Subrequests)
	one("memoryMiB", i64(old.Spec.Limits.MemoryMiB), i64(cur.Spec.Limits.MemoryMiB), limits.MemoryMiBDefault, limits.MemoryMiB)
	return out
}

// ValidateDelete implements admission.Validator; deletes are always allowed.
func (v *WorkerValidator) ValidateDelete(context.Context, *v1alpha1.Worker) (admission.Warnings, error) {
	return nil, nil
}

// ValidateWorker checks a Worker against its profile. It returns the warnings and an
// apierrors Invalid error listing every rejected field.
func (w *Webhooks) ValidateWorker(ctx context.Context, wk *v1alpha1.Worker) (admission.Warnings, error) {
	return w.validateWorker(ctx, nil, wk)
}

// validateWorker is ValidateWorker of an update from old (nil: a create).
func (w *Webhooks) validateWorker(ctx context.Context, old, wk *v1alpha1.Worker) (admission.Warnings, error) {
	c := &check{t: w.opts.Limits, p: w.profileOf(wk.Spec.Limits)}
	spec := field.NewPath("spec")
	s := &wk.Spec
	validateWorkerSpec(c, spec, s, w.opts.WorkerdVersion, w.opts.ScriptSizeRules)
	c.add(validateUserWorkerName(field.NewPath("metadata", "name"), wk.Name, s.DispatchNamespace))
	c.add(validateReservedName(field.NewPath("metadata", "name"), wk.Name))
	c.add(validateServiceName(field.NewPath("metadata", "name"), wk.Name))
	c.add(validateNoNestedDispatch(spec, s))
	if wk.SharedUserWorker() {
		for _, err := range validateSharedUserWorker(spec, s) {
			c.add(err)
		}
	}
	w.validatePolicy(ctx, c, spec, old, wk)
	w.validateSource(ctx, c, spec.Child("source"), wk.Namespace, &s.Source)
	validateAIModelURLs(c, spec.Child("bindings"), s.Bindings, w.opts.Policy.OutboundDeny)
	for i, b := range s.Bindings {
		kind, name := b.Reference()
		if kind == "" || b.Optional() {
			continue
		}
		path := spec.Child("bindings").Index(i)
		for _, part := range strings.Split(b.ReferenceField(), ".") {
			path = path.Child(part)
		}
		w.reference(ctx, c, path, referenceGVK[kind], wk.Namespace, name)
	}
	return c.result("Worker", wk.Name)
}

// validateAIModelURLs refuses an ai binding's model url the admin's outbound policy
// denies: the Worker's sidecar would connect there (docs/ai.md).
func validateAIModelURLs(c *check, bindings *field.Path, bs []v1alpha1.Binding, deny []string) {
	for i, b := range bs {
		if b.AI == nil {
			continue
		}
		for j, m := range b.AI.Models {
			if m.URL != "" {
				c.add(validateSidecarEndpoint(bindings.Index(i).Child("ai", "models").Index(j).Child("url"), m.URL, deny,
					"the sidecar of the Worker's pods would connect there for the ai binding"))
			}
		}
	}
}

// validateWorkerSpec holds the Worker checks that need no lookups: compatibility date
// and flags, limits, environment variables, and the size of inline sources.
func validateWorkerSpec(c *check, spec *field.Path, s *v1alpha1.WorkerSpec, workerdVersion, scriptSizeRules string) {
	version := workerdVersion
	if v := runtimeVersion(s); v != "" {
		version = v
	}
	c.add(validateRuntime(spec.Child("runtime"), s.Runtime))
	c.add(validateCompatibilityDate(spec.Child("compatibilityDate"), s.CompatibilityDate, version))
	validateCompatibilityFlags(c, spec.Child("compatibilityFlags"), s.CompatibilityFlags, s.CompatibilityDate, version)
	if s.Limits != nil {
		lp := spec.Child("limits")
		if s.Limits.CPUMs != nil {
			c.add(validateMin(lp.Child("cpuMs"), *s.Limits.CPUMs, 1))
			c.add(c.atMost(lp.Child("cpuMs"), *s.Limits.CPUMs, limits.CPUMs))
		}
		if s.Limits.Subrequests != nil {
			c.add(validateMin(lp.Child("subrequests"), *s.Limits.Subrequests, 1))
			c.add(c.atMost(lp.Child("subrequests"), *s.Limits.Subrequests, limits.Subrequests))
		}
		if s.Limits.MemoryMiB != nil {
			c.add(validateMin(lp.Child("memoryMiB"), int64(*s.Limits.MemoryMiB), 1))
			c.add(c.atMost(lp.Child("memoryMiB"), int64(*s.Limits.MemoryMiB), limits.MemoryMiB))
		}
	}
	validateEnvVars(c, spec.Child("bindings"), s.Bindings)
	validateAssets(c, spec.Child("assets"), s.Assets, s.Bindings)
	if s.Service != nil && s.Service.Port != nil {
		c.add(validateServicePort(spec.Child("service", "port"), *s.Service.Port))
	}
	if s.Pod != nil {
		validatePodLabels(c, spec.Child("pod", "labels"), s.Pod.Labels)
	}
	if s.Source.Inline != nil {
		validateInlineSource(c, scriptSizeRules, spec.Child("source", "inline", "modules"), s.Source.Inline)
	}
}

// validateUserWorkerName refuses a user Worker (spec.dispatchNamespace set) whose name
// its rpc Service's name, a DNS label, cannot hold: the Service could not be created.
func validateUserWorkerName(path *field.Path, name, dispatchNamespace string) *field.Error {
	if dispatchNamespace == "" || len(name) <= render.MaxUserWorkerName {
		return nil
	}
	return field.Invalid(path, name, fmt.Sprintf("must be at most %d characters for a user Worker (spec.dispatchNamespace %q): its rpc Service is named "+
		"wfp-<8 hex digits>-<name>, which must be a DNS label of at most %d characters; see docs/dispatch.md",
		render.MaxUserWorkerName, dispatchNamespace, validation.DNS1123LabelMaxLength))
}

// maxWorkerName keeps "<name>-rpc", the Worker's rpc Service, a DNS label.
const maxWorkerName = validation.DNS1035LabelMaxLength - len("-rpc")

// validateServiceName refuses a name the Worker's Services cannot take: a Service's
// name is a DNS-1035 label (a letter first, no dots).
func validateServiceName(path *field.Path, name string) *field.Error {
	msgs := validation.IsDNS1035Label(name)
	if len(msgs) == 0 && len(name) <= maxWorkerName {
		return nil
	}
	return field.Invalid(path, name, fmt.Sprintf("must be a DNS label of at most %d characters starting with a letter (lowercase letters, digits and '-'; no dots): "+
		"the Worker's Services take its name and \"<name>-rpc\" (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#rfc-1035-label-names)", maxWorkerName))
}

// validateReservedName refuses a Worker name starting with the prefix of user Workers'
// rpc Services: its own Services could take a user Worker's name, and a dispatcher
// would reach it.
func validateReservedName(path *field.Path, name string) *field.Error {
	if !strings.HasPrefix(name, render.DispatchServiceTag) {
		return nil
	}
	return field.Invalid(path, name, fmt.Sprintf("the prefix %q is reserved for the rpc Services of user Workers of dispatch namespaces; see docs/dispatch.md", render.DispatchServiceTag))
}

// validateNoNestedDispatch refuses a dispatchNamespace binding on a user Worker: the
// platform's customers' code does not dispatch to other customers.
func validateNoNestedDispatch(spec *field.Path, s *v1alpha1.WorkerSpec) *field.Error {
	if s.DispatchNamespace == "" {
		return nil
	}
	for i, b := range s.Bindings {
		if b.DispatchNamespace != nil {
			return field.Forbidden(spec.Child("bindings").Index(i).Child("dispatchNamespace"),
				fmt.Sprintf("a user Worker (spec.dispatchNamespace %q) may not bind a dispatch namespace: only the platform's dispatch Workers do; see docs/dispatch.md", s.DispatchNamespace))
		}
	}
	return nil
}

// sharedAllows ends every refusal of validateSharedUserWorker: what a Shared user
// Worker may set, and where it is documented.
const sharedAllows = "spec.dispatchPlacement Shared takes, besides spec.compatibilityDate and compatibilityFlags, only " +
	"spec.source.inline or spec.source.configMap, text and json bindings, and spec.limits.profile, cpuMs and subrequests; " +
	`see "Shared placement" in docs/dispatch.md`

// validateSharedUserWorker refuses, on a Shared user Worker (Worker.SharedUserWorker),
// what an isolate its dispatch Workers load with workerd's workerLoader cannot have:
// an image source, assets, bindings other than text and json, and every field of a
// Worker's own pods (validateSharedNoPods).
func validateSharedUserWorker(spec *field.Path, s *v1alpha1.WorkerSpec) field.ErrorList {
	var errs field.ErrorList
	if s.Source.Image != nil {
		errs = append(errs, field.Forbidden(spec.Child("source", "image"),
			"a Shared user Worker's modules are handed to workerLoader by its dispatch Workers, which read them from the Worker object or its ConfigMap and pull no image; "+sharedAllows))
	}
	if s.Assets != nil {
		errs = append(errs, field.Forbidden(spec.Child("assets"),
			"a Shared user Worker has no pods of its own to serve static assets from: it runs with its dispatch Workers' pods; "+sharedAllows))
	}
	for i := range s.Bindings {
		if err := validateSharedBinding(spec.Child("bindings").Index(i), &s.Bindings[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return append(errs, validateSharedNoPods(spec, s)...)
}

// validateSharedBinding refuses a Shared user Worker's binding that is not a text or
// json value: the isolate workerLoader creates gets plain values in env, and no
// Secret, Service, object or sidecar of its own.
func validateSharedBinding(path *field.Path, b *v1alpha1.Binding) *field.Error {
	for _, k := range b.Kinds() {
		if k != v1alpha1.BindingText && k != v1alpha1.BindingJSON {
			return field.Forbidden(path, fmt.Sprintf("binding %q is a %s binding: a Shared user Worker runs as an isolate in its dispatch Workers' pods, "+
				"whose env holds plain text and json values only; %s", b.Name, k, sharedAllows))
		}
	}
	return nil
}

// validateSharedNoPods refuses on a Shared user Worker each field that configures a
// Worker's own pods, Service or versions: it has none, and runs with its dispatch
// Workers' pods.
func validateSharedNoPods(spec *field.Path, s *v1alpha1.WorkerSpec) field.ErrorList {
	const none = "a Shared user Worker has no pods of its own: it runs with its dispatch Workers' pods"
	fields := []struct {
		path *field.Path
		set  bool
		what string
	}{
		{spec.Child("replicas"), s.Replicas != nil, "it is served by as many pods as their spec.replicas"},
		{spec.Child("runtime"), s.Runtime != nil, "it runs on their workerd (their spec.runtime)"},
		{spec.Child("pod"), s.Pod != nil, "their spec.pod applies"},
		{spec.Child("service"), s.Service != nil, "it has no Service either and is reached only through their dispatchNamespace binding"},
		{spec.Child("deployment"), s.Deployment != nil, "they load the code of this spec, one version"},
		{spec.Child("outbound"), s.Outbound != nil, "its fetch() and connect() leave from their pods, under their outbound rules"},
		{spec.Child("tails"), len(s.Tails) > 0, "tail Workers are wired into the workerd config of a Worker's own pods"},
		{spec.Child("limits", "memoryMiB"), s.Limits != nil && s.Limits.MemoryMiB != nil, "memory is their containers' and heap's limit (their spec.limits.memoryMiB)"},
	}
	var errs field.ErrorList
	for _, f := range fields {
		if f.set {
			errs = append(errs, field.Forbidden(f.path, none+", and "+f.what+"; "+sharedAllows))
		}
	}
	return errs
}

// validateCompatibilityDate checks that date is a calendar date not after the newest
// date workerd version supports.
func validateCompatibilityDate(path *field.Path, date, workerdVersion string) *field.Error {
	d, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return field.Invalid(path, date, "must be a calendar date YYYY-MM-DD")
	}
	newest, err := SupportedCompatibilityDate(workerdVersion)
	if err != nil {
		return field.Invalid(field.NewPath("spec", "runtime", "version"), workerdVersion, err.Error())
	}
	source := fmt.Sprintf("the workerd version %s, whose middle field is that date", workerdVersion)
	if workerdVersion == PinnedWorkerdVersion {
		source = fmt.Sprintf("workerd %s itself: \"the newest date supported by this server binary\"", workerdVersion)
	}
	n, _ := time.Parse(time.DateOnly, newest)
	if d.After(n) {
		return field.Invalid(path, date, fmt.Sprintf("must not be after %s, the newest compatibility date workerd %s supports "+
			"(limit: workerd supportedCompatibilityDate; source: %s)", newest, workerdVersion, source))
	}
	return nil
}

// validateEnvVars checks the number of environment variables (text, json and
// secretKeyRef bindings), the size of text and json values, and that json is JSON.
func validateEnvVars(c *check, path *field.Path, bindings []v1alpha1.Binding) {
	n := int64(0)
	for i, b := range bindings {
		if !b.IsEnvVar() {
			continue
		}
		n++
		value, ok := b.Value()
		if !ok {
			continue
		}
		vp := path.Index(i).Child(string(b.Kind()))
		c.add(c.tooMany(vp, int64(len(value)), limits.EnvVarBytes, "the value's size"))
		if b.Kind() == v1alpha1.BindingJSON && !json.Valid([]byte(value)) {
			c.add(field.Invalid(vp, truncate(value), "must be a JSON document"))
		}
	}
	c.add(c.tooMany(path, n, limits.EnvVars, "the number of environment variables (text, json and secretKeyRef bindings)"))
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// validateInlineSource checks the modules' base64, their total size, and the size
// they take in the object (limits.InlineSourceBytes: it must fit etcd).
func validateInlineSource(c *check, rules string, mp *field.Path, src *v1alpha1.InlineSource) {
	var modules [][]byte
	stored := int64(0)
	for i, m := range src.Modules {
		switch {
		case m.Content != nil:
			stored += int64(len(*m.Content))
			modules = append(modules, []byte(*m.Content))
		case m.ContentBase64 != nil:
			stored += int64(len(*m.ContentBase64))
			b, err := base64.StdEncoding.DecodeString(*m.ContentBase64)
			if err != nil {
				c.add(field.Invalid(mp.Index(i).Child("contentBase64"), truncate(*m.ContentBase64), "must be standard base64: "+err.Error()))
				continue
			}
			modules = append(modules, b)
		}
	}
	if err := c.tooMany(mp, stored, limits.InlineSourceBytes, "the inline modules' size in the object (content and contentBase64 text)"); err != nil {
		err.Detail += "; a larger bundle goes in an OCI image: `workerd-operator import --image REF` packs and pushes it and writes spec.source.image (docs/deploy.md)"
		c.add(err)
	}
	validateScriptSize(c, rules, mp, modules)
}

// validateSource checks the script size of a configMap source (inline sources are
// checked by validateWorkerSpec).
func (w *Webhooks) validateSource(ctx context.Context, c *check, path *field.Path, ns string, src *v1alpha1.WorkerSource) {
	var modules [][]byte
	switch {
	case src.ConfigMap != nil:
		cp := path.Child("configMap", "name")
		var cm corev1.ConfigMap
		err := w.get(ctx, ns, src.ConfigMap.Name, &cm)
		switch {
		case apierrors.IsNotFound(err):
			c.warn("%s: ConfigMap %s/%s does not exist yet; its script size is checked by the controller", cp, ns, src.ConfigMap.Name)
			return
		case err != nil:
			c.warn("%s: could not read ConfigMap %s/%s (%v); its script size is checked by the controller", cp, ns, src.ConfigMap.Name, err)
			return
		}
		_, inData := cm.Data[src.ConfigMap.Main]
		_, inBinary := cm.BinaryData[src.ConfigMap.Main]
		if !inData && !inBinary {
			c.warn("%s: ConfigMap %s/%s has no key %q yet", path.Child("configMap", "main"), ns, src.ConfigMap.Name, src.ConfigMap.Main)
		}
		for _, v := range cm.Data {
			modules = append(modules, []byte(v))
		}
		for _, v := range cm.BinaryData {
			modules = append(modules, v)
		}
		validateScriptSize(c, w.opts.ScriptSizeRules, cp, modules)
	}
}

// validateScriptSize checks the total size of a Worker's modules under the configured
// generation of Cloudflare's rules.
func validateScriptSize(c *check, rules string, path *field.Path, modules [][]byte) {
	total := int64(0)
	for _, m := range modules {
		total += int64(len(m))
	}
	if rules == ScriptSizeRules2024 {
		c.add(c.tooMany(path, total, limits.ScriptSize2024Bytes, "the Worker's size (all modules, uncompressed)"))
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		for _, m := range modules {
			_, _ = zw.Write(m)
		}
		_ = zw.Close()
		c.add(c.tooMany(path, int64(buf.Len()), limits.ScriptSize2024GzBytes, "the Worker's size after gzip"))
		return
	}
	c.add(c.tooMany(path, total, limits.ScriptSizeBytes, "the Worker's size (all modules, uncompressed)"))
}

// validateServicePort refuses the pod's own ports for the http socket: workerd could
// not bind it, or the Service would expose an internal socket as the Worker's.
func validateServicePort(path *field.Path, port int32) *field.Error {
	if slices.Contains(podcontract.ReservedPorts, port) {
		return field.Invalid(path, port, fmt.Sprintf("is one of the pod's own ports %v; choose another (default %d); see docs/pod-contract.md",
			podcontract.ReservedPorts, podcontract.DefaultHTTPPort))
	}
	return nil
}

// validatePodLabels refuses the operator's own label keys in spec.pod.labels: with them
// a Worker's pods would be selected as another object's (its Service, its cron
// triggers) or admitted as the manager by NetworkPolicies.
func validatePodLabels(c *check, path *field.Path, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if podcontract.IsOperatorLabel(k) {
			c.add(field.Invalid(path.Key(k), labels[k], fmt.Sprintf("is a label the operator sets and selects pods by (keys %s*, %s, %s, %s, %s); use another key; see docs/pod-contract.md",
				podcontract.OperatorLabelPrefix, podcontract.LabelName, podcontract.LabelInstance, podcontract.LabelManagedBy, podcontract.LabelAppComponent)))
		}
	}
}
