package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/workflows/duration"
)

// admitCase is one create (or create-then-update) through the real API server with the
// webhooks installed.
type admitCase struct {
	name     string
	obj      client.Object
	update   func(client.Object) // when set, obj is created first and the expectation applies to the update
	wantErr  []string            // substrings of the API server's error; nil = admitted
	wantWarn []string            // substrings of one warning
	// wantNoWarn: no warning may name this field path (a defaulted value).
	wantNoWarn string
}

const testNS = "wh"

func module(content string) v1alpha1.Module {
	return v1alpha1.Module{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: &content}
}

func newWorker(name string, p limits.Profile, mut func(*v1alpha1.WorkerSpec)) *v1alpha1.Worker {
	w := &v1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: v1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			Source:            v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{module("export default {}")}}},
			Limits:            &v1alpha1.WorkerLimits{Profile: v1alpha1.LimitProfile(p)},
		},
	}
	if mut != nil {
		mut(&w.Spec)
	}
	return w
}

// profileWorker is the Worker whose profile a Workflow or DurableObjectNamespace runs under.
func profileWorker(p limits.Profile) string { return "profile-" + string(p) }

func newWorkflow(name string, p limits.Profile, mut func(*v1alpha1.WorkflowSpec)) *v1alpha1.Workflow {
	wf := &v1alpha1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       v1alpha1.WorkflowSpec{WorkerRef: v1alpha1.LocalObjectReference{Name: profileWorker(p)}, ClassName: "Flow"},
	}
	if mut != nil {
		mut(&wf.Spec)
	}
	return wf
}

func newDON(name string, p limits.Profile, mut func(*v1alpha1.DurableObjectNamespaceSpec)) *v1alpha1.DurableObjectNamespace {
	o := &v1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       v1alpha1.DurableObjectNamespaceSpec{WorkerRef: v1alpha1.LocalObjectReference{Name: profileWorker(p)}, ClassName: "Room"},
	}
	if mut != nil {
		mut(&o.Spec)
	}
	return o
}

func newCron(name string, mut func(*v1alpha1.CronScheduleSpec)) *v1alpha1.CronSchedule {
	o := &v1alpha1.CronSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: v1alpha1.CronScheduleSpec{
			Schedules: []string{"*/5 * * * *"},
			Target:    v1alpha1.CronTarget{WorkerRef: &v1alpha1.LocalObjectReference{Name: profileWorker(limits.Paid)}},
		},
	}
	if mut != nil {
		mut(&o.Spec)
	}
	return o
}

// limitCases returns the just-inside and just-outside cases of limit n for every
// profile: inside is admitted (with the ≥ 90 % warning), outside is rejected with the
// field path, the limit name and its source — by the webhook, or above the CRD's
// maximum (Limit.API) by the API server's schema validation, whose CEL rule's message
// cites the limit and source too.
func limitCases(tbl *limits.Table, n limits.Name, path string, build func(name string, p limits.Profile, v int64) client.Object) []admitCase {
	var out []admitCase
	for _, p := range limits.Profiles {
		v := tbl.Get(p, n)
		base := strings.ToLower(strings.ReplaceAll(string(n), "_", "-")) + "-" + string(p)
		inside := admitCase{name: base + "-inside", obj: build(base+"-in", p, v),
			wantWarn: []string{path, "of the limit " + fmt.Sprint(v), "limit " + string(n)}}
		if d, ok := defaultedBy[n]; ok && defaultValue(tbl, p, d, n) == v {
			// The maximum is also the default: admitted without a warning.
			inside.wantWarn, inside.wantNoWarn = nil, path
		}
		out = append(out, inside)
		if doc, _ := limits.Lookup(n); doc.API != nil && v+1 > doc.API.Max {
			// The schema's rule cites the documented source (no custom suffix); a list
			// over its maxItems gets the API server's own "Too many" error only.
			out = append(out, admitCase{
				name:    base + "-outside-schema",
				obj:     build(base+"-out", p, v+1),
				wantErr: []string{path, fmt.Sprint(v + 1), doc.APIMessage()},
			})
			continue
		}
		out = append(out, admitCase{
			name:    base + "-outside",
			obj:     build(base+"-out", p, v+1),
			wantErr: []string{path + ": Invalid value: " + fmt.Sprint(v+1), fmt.Sprintf("must be at most %d", v), fmt.Sprintf("profile %q", p), "limit " + string(n), "source: " + citedSource(tbl, p, n) + ")"},
		})
	}
	return out
}

// citedSource is the source a rejection under profile p must cite for limit n: the
// documented source, with the note that the operator set a custom ceiling only under
// the custom profile (an operator's ceiling changes no other profile's value).
func citedSource(tbl *limits.Table, p limits.Profile, n limits.Name) string {
	l, _ := limits.Lookup(n)
	if _, set := tbl.CustomCeilings()[n]; set && p == limits.Custom {
		return l.Source + " (custom ceiling set by the operator)"
	}
	return l.Source
}

func textBindings(n int64) []v1alpha1.Binding {
	out := make([]v1alpha1.Binding, n)
	for i := range out {
		v := "x"
		out[i] = v1alpha1.Binding{Name: fmt.Sprintf("VAR_%d", i), Text: &v}
	}
	return out
}

func cases(tbl *limits.Table) []admitCase {
	var cs []admitCase
	// Worker limits per profile.
	cs = append(cs, limitCases(tbl, limits.CPUMs, "spec.limits.cpuMs", func(name string, p limits.Profile, v int64) client.Object {
		return newWorker(name, p, func(s *v1alpha1.WorkerSpec) { s.Limits.CPUMs = &v })
	})...)
	cs = append(cs, limitCases(tbl, limits.Subrequests, "spec.limits.subrequests", func(name string, p limits.Profile, v int64) client.Object {
		return newWorker(name, p, func(s *v1alpha1.WorkerSpec) { s.Limits.Subrequests = &v })
	})...)
	cs = append(cs, limitCases(tbl, limits.MemoryMiB, "spec.limits.memoryMiB", func(name string, p limits.Profile, v int64) client.Object {
		return newWorker(name, p, func(s *v1alpha1.WorkerSpec) { s.Limits.MemoryMiB = ptr(int32(v)) })
	})...)
	cs = append(cs, limitCases(tbl, limits.EnvVars, "spec.bindings", func(name string, p limits.Profile, v int64) client.Object {
		return newWorker(name, p, func(s *v1alpha1.WorkerSpec) { s.Bindings = textBindings(v) })
	})...)
	envBytes := tbl.Get(limits.Paid, limits.EnvVarBytes)
	envL, _ := tbl.Limit(limits.EnvVarBytes)
	cs = append(cs,
		// Nothing set: the defaulter's values (memoryMiB 128 is also the paid maximum)
		// draw no "near the limit" warning.
		admitCase{name: "defaults-no-warning", obj: newWorker("defaults-only", limits.Paid, func(s *v1alpha1.WorkerSpec) { s.Limits = nil }),
			wantNoWarn: "spec.limits"},
		admitCase{name: "env-var-bytes-inside", obj: newWorker("env-bytes-in", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			v := strings.Repeat("a", int(envBytes))
			s.Bindings = []v1alpha1.Binding{{Name: "BIG", Text: &v}}
		}), wantWarn: []string{"spec.bindings[0].text", "limit env_var_bytes"}},
		admitCase{name: "env-var-bytes-outside", obj: newWorker("env-bytes-out", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			v := strings.Repeat("a", int(envBytes)+1)
			s.Bindings = []v1alpha1.Binding{{Name: "BIG", Text: &v}}
		}), wantErr: []string{"spec.bindings[0].text: Invalid value: " + fmt.Sprint(envBytes+1), "limit env_var_bytes", "source: " + envL.Source}},
		admitCase{name: "json-binding-invalid", obj: newWorker("json-bad", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			v := `{"a":`
			s.Bindings = []v1alpha1.Binding{{Name: "CFG", JSON: &v}}
		}), wantErr: []string{"spec.bindings[0].json", "must be a JSON document"}},
		admitCase{name: "json-binding-valid", obj: newWorker("json-ok", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			v := `{"a":[1,2,{"b":null}]}`
			s.Bindings = []v1alpha1.Binding{{Name: "CFG", JSON: &v}}
		})},
	)
	// Script size: the custom ceiling (the documented 64 MiB is above what etcd stores;
	// TestScriptSizeDocumented covers it without the API server).
	size := tbl.Get(limits.Custom, limits.ScriptSizeBytes)
	sizeL, _ := tbl.Limit(limits.ScriptSizeBytes)
	cs = append(cs,
		admitCase{name: "script-size-custom-inside", obj: newWorker("size-in", limits.Custom, func(s *v1alpha1.WorkerSpec) {
			s.Source.Inline.Modules = []v1alpha1.Module{module(strings.Repeat("/", int(size)))}
		}), wantWarn: []string{"spec.source.inline.modules", "limit script_size_bytes"}},
		admitCase{name: "script-size-custom-outside", obj: newWorker("size-out", limits.Custom, func(s *v1alpha1.WorkerSpec) {
			s.Source.Inline.Modules = []v1alpha1.Module{module(strings.Repeat("/", int(size)-1)), {Name: "b.bin", Type: v1alpha1.ModuleData, ContentBase64: ptr("AAA=")}}
		}), wantErr: []string{"spec.source.inline.modules: Invalid value: " + fmt.Sprint(size+1), "limit script_size_bytes", "source: " + sizeL.Source}},
		admitCase{name: "script-size-configmap-custom-outside", obj: newWorker("size-cm-out", limits.Custom, func(s *v1alpha1.WorkerSpec) {
			s.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "big-bundle", Main: "worker.js"}}
		}), wantErr: []string{"spec.source.configMap.name: Invalid value: " + fmt.Sprint(size+1), "limit script_size_bytes"}},
	)
	// Inline source size as stored (it must fit etcd): the same on every profile; paid's
	// script size (64 MiB) is far above it, so only this limit speaks.
	inline := tbl.Get(limits.Paid, limits.InlineSourceBytes)
	inlineL, _ := limits.Lookup(limits.InlineSourceBytes)
	cs = append(cs,
		admitCase{name: "inline-source-paid-inside", obj: newWorker("inline-in", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Source.Inline.Modules = []v1alpha1.Module{module(strings.Repeat("/", int(inline)-8)), {Name: "b.bin", Type: v1alpha1.ModuleData, ContentBase64: ptr("AAAAAAA=")}}
		}), wantWarn: []string{"spec.source.inline.modules", "limit inline_source_bytes"}},
		admitCase{name: "inline-source-paid-outside", obj: newWorker("inline-out", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Source.Inline.Modules = []v1alpha1.Module{module(strings.Repeat("/", int(inline)-7)), {Name: "b.bin", Type: v1alpha1.ModuleData, ContentBase64: ptr("AAAAAAA=")}}
		}), wantErr: []string{"spec.source.inline.modules: Invalid value: " + fmt.Sprint(inline+1), fmt.Sprintf("must be at most %d", inline), "limit inline_source_bytes", "source: " + inlineL.Source, "import --image", "spec.source.image"}},
		admitCase{name: "image-modules-main-first", obj: newWorker("img-mods", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "localhost:5001/b:1", Main: "index.js",
				Modules: []v1alpha1.ImageModule{{Name: "lib.js", Type: v1alpha1.ModuleESModule}, {Name: "index.js", Type: v1alpha1.ModuleESModule}}}}
		}), wantErr: []string{"spec.source.image", "modules[0] must be main"}},
		admitCase{name: "configmap-missing-warns", obj: newWorker("cm-missing", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "not-yet", Main: "worker.js"}}
		}), wantWarn: []string{"spec.source.configMap.name", "ConfigMap wh/not-yet does not exist yet"}},
		admitCase{name: "contentbase64-invalid", obj: newWorker("b64-bad", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Source.Inline.Modules = append(s.Source.Inline.Modules, v1alpha1.Module{Name: "d.bin", Type: v1alpha1.ModuleData, ContentBase64: ptr("!!")})
		}), wantErr: []string{"spec.source.inline.modules[1].contentBase64", "must be standard base64"}},
	)
	cs = append(cs, assetCases(tbl)...)
	// Compatibility date and flags.
	// The newest date the pinned binary supports (TestCompatFlagsMatchWorkerd asks it),
	// a week past the date in its version.
	newest := PinnedSupportedCompatibilityDate
	cs = append(cs,
		admitCase{name: "compat-date-newest", obj: newWorker("date-in", limits.Paid, func(s *v1alpha1.WorkerSpec) { s.CompatibilityDate = newest })},
		admitCase{name: "compat-date-after-newest", obj: newWorker("date-out", limits.Paid, func(s *v1alpha1.WorkerSpec) { s.CompatibilityDate = dayAfter(newest) }),
			wantErr: []string{"spec.compatibilityDate: Invalid value: \"" + dayAfter(newest) + "\"", "must not be after " + newest, "workerd " + PinnedWorkerdVersion}},
		admitCase{name: "compat-date-after-runtime-version", obj: newWorker("date-rt", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate = "2026-06-02"
			s.Runtime = &v1alpha1.RuntimeSpec{Version: "1.20260601.0"}
		}), wantErr: []string{"spec.compatibilityDate", "must not be after 2026-06-01", "workerd 1.20260601.0"}},
		admitCase{name: "compat-date-not-a-day", obj: newWorker("date-feb30", limits.Paid, func(s *v1alpha1.WorkerSpec) { s.CompatibilityDate = "2026-02-30" }),
			wantErr: []string{"spec.compatibilityDate", "calendar date"}},
		admitCase{name: "experimental-flag-free", obj: newWorker("exp-free", limits.Free, func(s *v1alpha1.WorkerSpec) { s.CompatibilityFlags = []string{"nodejs_compat", "experimental"} }),
			wantErr: []string{"spec.compatibilityFlags[1]: Forbidden", `"experimental" is an experimental workerd compatibility flag`, `profile "free"`, "compatibility-date.capnp"}},
		admitCase{name: "experimental-flag-paid", obj: newWorker("exp-paid", limits.Paid, func(s *v1alpha1.WorkerSpec) { s.CompatibilityFlags = []string{"rtti_api"} }),
			wantErr: []string{"spec.compatibilityFlags[0]: Forbidden", `profile "paid"`}},
		admitCase{name: "experimental-flag-custom", obj: newWorker("exp-custom", limits.Custom, func(s *v1alpha1.WorkerSpec) { s.CompatibilityFlags = []string{"rtti_api"} })},
		// A profile change keeps the old profile's defaults (the defaulter adds only what
		// is missing): the validator says so, and how to get the new profile's.
		admitCase{name: "profile-free-to-paid-keeps-defaults-warns", obj: newWorker("prof-f2p", limits.Free, nil),
			update: func(o client.Object) { o.(*v1alpha1.Worker).Spec.Limits.Profile = v1alpha1.ProfilePaid },
			wantWarn: []string{"spec.limits.cpuMs", fmt.Sprintf("%d is the default of profile \"free\"", tbl.Get(limits.Free, limits.CPUMsDefault)),
				fmt.Sprintf("profile \"paid\" defaults it to %d", tbl.Get(limits.Paid, limits.CPUMsDefault)), "remove spec.limits.cpuMs"}},
		admitCase{name: "profile-paid-to-free-defaults-rejected-with-hint", obj: newWorker("prof-p2f", limits.Paid, nil),
			update:  func(o client.Object) { o.(*v1alpha1.Worker).Spec.Limits.Profile = v1alpha1.ProfileFree },
			wantErr: []string{"spec.limits.subrequests: Invalid value: " + fmt.Sprint(tbl.Get(limits.Paid, limits.SubrequestsDefault)), `profile "free"`},
			wantWarn: []string{"spec.limits.subrequests", fmt.Sprintf("%d is the default of profile \"paid\"", tbl.Get(limits.Paid, limits.SubrequestsDefault)),
				fmt.Sprintf("profile \"free\" defaults it to %d", tbl.Get(limits.Free, limits.SubrequestsDefault))}},
		// Flags workerd refuses at start-up (it exits 1: the pods could never run).
		admitCase{name: "compat-flag-unknown", obj: newWorker("flag-unknown", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityFlags = []string{"nodejs_compat", "definitely_not_a_flag"}
		}),
			wantErr: []string{"spec.compatibilityFlags[1]: Invalid value: \"definitely_not_a_flag\"", "not a compatibility flag of workerd " + PinnedWorkerdVersion, "No such compatibility flag"}},
		admitCase{name: "compat-flags-contradictory", obj: newWorker("flag-contra", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityFlags = []string{contradictory.flags[0], contradictory.flags[1]}
		}), wantErr: []string{"spec.compatibilityFlags[1]: Invalid value: \"" + contradictory.flags[1] + "\"", "contradicts spec.compatibilityFlags[0]", "mutually contradictory"}},
		admitCase{name: "compat-flag-already-default", obj: newWorker("flag-dflt", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate = dated.date
			s.CompatibilityFlags = []string{dated.enable}
		}), wantErr: []string{"spec.compatibilityFlags[0]: Invalid value: \"" + dated.enable + "\"", "became the default as of " + dated.date}},
		admitCase{name: "compat-flag-before-its-date", obj: newWorker("flag-early", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate = dayBefore(dated.date)
			s.CompatibilityFlags = []string{dated.enable}
		})},
		// A few workerd flags have a hyphen in their name: the CRD's pattern admits them.
		admitCase{name: "compat-flag-with-hyphen", obj: newWorker("flag-hyphen", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate = hyphenatedDate
			s.CompatibilityFlags = []string{hyphenated}
		})},
		// Experimental in an older workerd, not in the pinned one (TestCompatFlagsMatchWorkerd).
		admitCase{name: "compat-flag-no-longer-experimental-paid", obj: newWorker("flag-v8", limits.Paid, func(s *v1alpha1.WorkerSpec) { s.CompatibilityFlags = []string{"enable_nodejs_v8_module"} })},
		admitCase{name: "compat-flag-newly-experimental-paid", obj: newWorker("flag-timers", limits.Paid, func(s *v1alpha1.WorkerSpec) { s.CompatibilityFlags = []string{"precise_timers"} }),
			wantErr: []string{"spec.compatibilityFlags[0]: Forbidden", `"precise_timers" is an experimental workerd compatibility flag`, `profile "paid"`}},
		admitCase{name: "compat-flag-other-workerd-warns", obj: newWorker("flag-other-rt", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.CompatibilityDate = "2026-06-01"
			s.Runtime = &v1alpha1.RuntimeSpec{Version: "1.20260601.0"}
			s.CompatibilityFlags = []string{"definitely_not_a_flag"}
		}), wantWarn: []string{"spec.compatibilityFlags", "not checked", "workerd 1.20260601.0"}},
		admitCase{name: "service-binding-missing-warns", obj: newWorker("svc-missing", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "API", Service: &v1alpha1.ServiceBinding{Name: "api-not-yet"}}}
		}), wantWarn: []string{"spec.bindings[0].service.name", "Worker wh/api-not-yet does not exist yet"}},
		admitCase{name: "secret-missing-warns", obj: newWorker("secret-missing", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "TOKEN", SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "token-not-yet"}, Key: "t"}}}
		}), wantWarn: []string{"spec.bindings[0].secretKeyRef.name", "Secret wh/token-not-yet does not exist yet"}},
		admitCase{name: "hyperdrive-secret-missing-warns", obj: newWorker("hd-missing", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "DB", Hyperdrive: &v1alpha1.HyperdriveBinding{SecretRef: v1alpha1.LocalObjectReference{Name: "db-not-yet"}}}}
		}), wantWarn: []string{"spec.bindings[0].hyperdrive.secretRef.name", "Secret wh/db-not-yet does not exist yet"}},
		// A user Worker's rpc Service, wfp-<8 hex digits>-<name>, is a DNS label.
		admitCase{name: "user-worker-name-longest", obj: newWorker(userWorkerName(render.MaxUserWorkerName), limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.DispatchNamespace = "customers"
		})},
		admitCase{name: "user-worker-name-too-long", obj: newWorker(userWorkerName(render.MaxUserWorkerName+1), limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.DispatchNamespace = "customers"
		}), wantErr: []string{`metadata.name: Invalid value: "` + userWorkerName(render.MaxUserWorkerName+1) + `"`,
			fmt.Sprintf("must be at most %d characters for a user Worker", render.MaxUserWorkerName), "must be a DNS label", "docs/dispatch.md"}},
		admitCase{name: "long-name-not-user-worker", obj: newWorker("not-"+userWorkerName(render.MaxUserWorkerName+1-len("not-")), limits.Paid, nil)},
		admitCase{name: "dispatch-namespace-binding", obj: newWorker("dispatcher", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "DISPATCHER", DispatchNamespace: &v1alpha1.DispatchNamespaceBinding{Namespace: "customers"}}}
		})},
		admitCase{name: "name-with-dot", obj: newWorker("site.c", limits.Paid, nil),
			wantErr: []string{`metadata.name: Invalid value: "site.c"`, "must be a DNS label of at most 59 characters starting with a letter", "no dots", "rfc-1035-label-names"}},
		admitCase{name: "name-starts-with-digit", obj: newWorker("2fa", limits.Paid, nil),
			wantErr: []string{`metadata.name: Invalid value: "2fa"`, "starting with a letter"}},
		admitCase{name: "name-longest", obj: newWorker("n"+strings.Repeat("x", 58), limits.Paid, nil)},
		admitCase{name: "name-too-long", obj: newWorker("n"+strings.Repeat("x", 59), limits.Paid, nil),
			wantErr: []string{"metadata.name: Invalid value", `"<name>-rpc"`}},
		admitCase{name: "reserved-name-prefix", obj: newWorker("wfp-1a2b3c4d-site", limits.Paid, nil),
			wantErr: []string{`metadata.name: Invalid value: "wfp-1a2b3c4d-site"`, `the prefix "wfp-" is reserved`, "docs/dispatch.md"}},
		admitCase{name: "user-worker-dispatches", obj: newWorker("nested", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.DispatchNamespace = "customers"
			s.Bindings = []v1alpha1.Binding{{Name: "D", DispatchNamespace: &v1alpha1.DispatchNamespaceBinding{Namespace: "others"}}}
		}), wantErr: []string{"spec.bindings[0].dispatchNamespace: Forbidden", "may not bind a dispatch namespace", "docs/dispatch.md"}},
		// A Shared user Worker through the defaulter (no replicas, no memoryMiB), the
		// CRD's rules and the validator (shared_test.go has every refusal).
		admitCase{name: "shared-user-worker", obj: newSharedWorker("shared", func(s *v1alpha1.WorkerSpec) { s.Limits = nil })},
		admitCase{name: "shared-user-worker-image", obj: newSharedWorker("shared-img", func(s *v1alpha1.WorkerSpec) {
			s.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "ghcr.io/acme/site:1", Main: "worker.js"}}
		}), wantErr: []string{"spec.source.image: Forbidden", "spec.source.inline or spec.source.configMap", `"Shared placement" in docs/dispatch.md`}},
		admitCase{name: "shared-user-worker-replicas", obj: newSharedWorker("shared-rep", func(s *v1alpha1.WorkerSpec) { s.Replicas = ptr(int32(2)) }),
			wantErr: []string{"spec.replicas", "has no pods of its own"}},
		admitCase{name: "r2bucket-missing-warns", obj: newWorker("r2-missing", limits.Paid, func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "PHOTOS", R2Bucket: &v1alpha1.LocalObjectReference{Name: "photos-not-yet"}}}
		}), wantWarn: []string{"spec.bindings[0].r2Bucket.name", "R2Bucket wh/photos-not-yet does not exist yet"}},
	)

	// Workflow limits per profile (the profile of the referenced Worker).
	cs = append(cs, limitCases(tbl, limits.WorkflowSteps, "spec.limits.steps", func(name string, p limits.Profile, v int64) client.Object {
		return newWorkflow(name, p, func(s *v1alpha1.WorkflowSpec) { s.Limits = &v1alpha1.WorkflowLimits{Steps: ptr(int32(v))} })
	})...)
	cs = append(cs, limitCases(tbl, limits.WorkflowRunningInstances, "spec.concurrency.limit", func(name string, p limits.Profile, v int64) client.Object {
		return newWorkflow(name, p, func(s *v1alpha1.WorkflowSpec) { s.Concurrency = &v1alpha1.WorkflowConcurrency{Limit: ptr(int32(v))} })
	})...)
	for _, p := range limits.Profiles {
		max := tbl.Get(p, limits.WorkflowRetentionMs)
		in, out := duration.Format(max), fmt.Sprint(max+1)
		cs = append(cs,
			admitCase{name: "workflow-retention-" + string(p) + "-inside", obj: newWorkflow("ret-in-"+string(p), p, func(s *v1alpha1.WorkflowSpec) {
				s.Retention = &v1alpha1.WorkflowRetention{Success: in, Error: in}
			})},
			admitCase{name: "workflow-retention-" + string(p) + "-outside", obj: newWorkflow("ret-out-"+string(p), p, func(s *v1alpha1.WorkflowSpec) {
				s.Retention = &v1alpha1.WorkflowRetention{Error: out}
			}), wantErr: []string{"spec.retention.error: Invalid value: \"" + out + "\"", "must be at most " + in, fmt.Sprintf("profile %q", p), "limit workflow_retention_ms", "source: " + citedSource(tbl, p, limits.WorkflowRetentionMs) + ")"}},
		)
	}
	sleepMax := tbl.Get(limits.Paid, limits.WorkflowSleepMs)
	cs = append(cs,
		admitCase{name: "workflow-timeout-zero", obj: newWorkflow("timeout-zero", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Defaults = &v1alpha1.StepDefaults{Timeout: "0 seconds"}
		}), wantErr: []string{"spec.defaults.timeout: Invalid value: \"0 seconds\"", "must be greater than 0"}},
		admitCase{name: "workflow-retry-delay-zero", obj: newWorkflow("delay-zero", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Defaults = &v1alpha1.StepDefaults{Retries: &v1alpha1.StepRetries{Delay: "0", Limit: ptr(int32(tbl.Get(limits.Paid, limits.WorkflowRetriesPerStep))), Backoff: v1alpha1.BackoffConstant}}
		}), wantWarn: []string{"spec.defaults.retries.limit", "limit workflow_retries_per_step"}},
		admitCase{name: "workflow-retries-limit-outside-schema", obj: newWorkflow("retries-over", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Defaults = &v1alpha1.StepDefaults{Retries: &v1alpha1.StepRetries{Limit: ptr(int32(tbl.Get(limits.Paid, limits.WorkflowRetriesPerStep) + 1))}}
		}), wantErr: []string{"spec.defaults.retries.limit", fmt.Sprint(tbl.Get(limits.Paid, limits.WorkflowRetriesPerStep) + 1)}},
		admitCase{name: "workflow-cron-length-inside", obj: newWorkflow("cron-len-in", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Schedules = []string{cronOfLength(tbl.Get(limits.Paid, limits.CronExpressionChar))}
		}), wantWarn: []string{"spec.schedules[0]", "limit cron_expression_chars"}},
		admitCase{name: "workflow-cron-length-outside-schema", obj: newWorkflow("cron-len-out", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Schedules = []string{cronOfLength(tbl.Get(limits.Paid, limits.CronExpressionChar) + 1)}
		}), wantErr: []string{"spec.schedules[0]", "256"}},
		admitCase{name: "workflow-retention-zero", obj: newWorkflow("ret-zero", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Retention = &v1alpha1.WorkflowRetention{Success: "0 days"}
		}), wantErr: []string{"spec.retention.success: Invalid value: \"0 days\"", "must be greater than 0", "finished instance", "source: " + limits.DocWorkflowsLimits}},
		// On Free the step default is also the maximum: no "near the limit" warning.
		admitCase{name: "workflow-free-defaults-no-warning", obj: newWorkflow("wf-free-dflt", limits.Free, nil), wantNoWarn: "spec.limits.steps"},
		admitCase{name: "workflow-timeout-max", obj: newWorkflow("timeout-max", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Defaults = &v1alpha1.StepDefaults{Timeout: duration.Format(sleepMax)}
		})},
		admitCase{name: "workflow-timeout-over-max", obj: newWorkflow("timeout-over", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Defaults = &v1alpha1.StepDefaults{Timeout: fmt.Sprint(sleepMax + 1)}
		}), wantErr: []string{"spec.defaults.timeout", "limit workflow_sleep_ms", "source: " + limits.DocWorkflowsLimits}},
		admitCase{name: "workflow-schedule-valid", obj: newWorkflow("sched-ok", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Schedules = []string{"0 9 * * MON-FRI", "59 23 LW * *"}
		})},
		admitCase{name: "workflow-schedule-never-fires", obj: newWorkflow("sched-never", limits.Paid, func(s *v1alpha1.WorkflowSpec) {
			s.Schedules = []string{"0 0 30 2 *"}
		}), wantErr: []string{"spec.schedules[0]", "can never fire", "source: " + limits.DocCronTriggers}},
		admitCase{name: "workflow-worker-missing-warns", obj: &v1alpha1.Workflow{
			ObjectMeta: metav1.ObjectMeta{Name: "no-worker", Namespace: testNS},
			Spec:       v1alpha1.WorkflowSpec{WorkerRef: v1alpha1.LocalObjectReference{Name: "later"}, ClassName: "Flow"},
		}, wantWarn: []string{"spec.workerRef.name", "Worker wh/later does not exist yet", `default profile "paid"`}},
	)

	// DurableObjectNamespace channel limits per profile, and shards.
	for _, ch := range []struct {
		n     limits.Name
		field string
		set   func(*v1alpha1.ChannelsSpec, *int32)
	}{
		{limits.ChannelsPerObject, "maxChannels", func(c *v1alpha1.ChannelsSpec, v *int32) { c.MaxChannels = v }},
		{limits.SubscribersPerChannel, "maxSubscribers", func(c *v1alpha1.ChannelsSpec, v *int32) { c.MaxSubscribers = v }},
		{limits.ChannelMessageBytes, "maxMessageBytes", func(c *v1alpha1.ChannelsSpec, v *int32) { c.MaxMessageBytes = v }},
		{limits.ChannelBacklogBytes, "maxBacklogBytes", func(c *v1alpha1.ChannelsSpec, v *int32) { c.MaxBacklogBytes = v }},
	} {
		cs = append(cs, limitCases(tbl, ch.n, "spec.channels."+ch.field, func(name string, p limits.Profile, v int64) client.Object {
			return newDON(name, p, func(s *v1alpha1.DurableObjectNamespaceSpec) {
				s.Channels = &v1alpha1.ChannelsSpec{Enabled: true}
				ch.set(s.Channels, ptr(int32(v)))
			})
		})...)
	}
	cs = append(cs,
		// A change of spec.shards moves objects through the namespace's backup
		// (docs/scaling.md): refused without one, admitted with one.
		admitCase{name: "don-shards-change-without-backup-rejected", obj: newDON("shards-change", limits.Paid, nil),
			update:  func(o client.Object) { o.(*v1alpha1.DurableObjectNamespace).Spec.Shards = ptr(int32(2)) },
			wantErr: []string{"spec", "shards: a change moves objects between shards through the namespace's backup", "set spec.backup first, then change shards (docs/scaling.md)"}},
		admitCase{name: "don-shards-change-with-new-backup-rejected", obj: newDON("shards-new-backup", limits.Paid, nil),
			update: func(o client.Object) {
				d := o.(*v1alpha1.DurableObjectNamespace)
				d.Spec.Shards = ptr(int32(2))
				d.Spec.Backup = &v1alpha1.BackupSpec{S3: v1alpha1.S3BucketSource{Endpoint: "https://s3.example.com", Bucket: "backups",
					CredentialsSecret: v1alpha1.LocalObjectReference{Name: "creds"}}}
			},
			wantErr: []string{"which the running shards must already ship"}},
		admitCase{name: "don-shards-change-with-backup", obj: newDON("shards-move", limits.Paid, func(s *v1alpha1.DurableObjectNamespaceSpec) {
			s.Backup = &v1alpha1.BackupSpec{S3: v1alpha1.S3BucketSource{Endpoint: "https://s3.example.com", Bucket: "backups",
				CredentialsSecret: v1alpha1.LocalObjectReference{Name: "creds"}}}
		}),
			update: func(o client.Object) { o.(*v1alpha1.DurableObjectNamespace).Spec.Shards = ptr(int32(8)) }},
		admitCase{name: "don-update-keeping-shards", obj: newDON("shards-keep", limits.Paid, func(s *v1alpha1.DurableObjectNamespaceSpec) { s.Shards = ptr(int32(3)) }),
			update: func(o client.Object) { o.(*v1alpha1.DurableObjectNamespace).Spec.PreventEviction = true }},
		admitCase{name: "don-worker-missing-warns", obj: &v1alpha1.DurableObjectNamespace{
			ObjectMeta: metav1.ObjectMeta{Name: "don-no-worker", Namespace: testNS},
			Spec:       v1alpha1.DurableObjectNamespaceSpec{WorkerRef: v1alpha1.LocalObjectReference{Name: "later"}, ClassName: "Room"},
		}, wantWarn: []string{"spec.workerRef.name", "Worker wh/later does not exist yet"}},
	)

	// CronSchedule.
	paramsMax := tbl.Get(limits.Paid, limits.WorkflowParamsBytes)
	paramsL, _ := tbl.Limit(limits.WorkflowParamsBytes)
	params := func(n int64) *apiextensionsv1.JSON {
		// {"p":"xxx"} is 8 bytes plus the x's.
		return &apiextensionsv1.JSON{Raw: []byte(`{"p":"` + strings.Repeat("x", int(n-8)) + `"}`)}
	}
	cs = append(cs,
		admitCase{name: "cron-valid", obj: newCron("cron-ok", func(s *v1alpha1.CronScheduleSpec) {
			s.Schedules = []string{"*/3 * * * *", "0 18 * * 6L", "10 7 * * mon-fri"}
		})},
		admitCase{name: "cron-dow-zero", obj: newCron("cron-dow0", func(s *v1alpha1.CronScheduleSpec) { s.Schedules = []string{"0 0 * * 0"} }),
			wantErr: []string{"spec.schedules[0]", `cron expression "0 0 * * 0"`, "source: " + limits.DocCronTriggers}},
		admitCase{name: "cron-never-fires", obj: newCron("cron-never", func(s *v1alpha1.CronScheduleSpec) { s.Schedules = []string{"0 0 31 4 *"} }),
			wantErr: []string{"spec.schedules[0]", "can never fire"}},
		admitCase{name: "cron-timezone-valid", obj: newCron("cron-tz", func(s *v1alpha1.CronScheduleSpec) { s.TimeZone = "Europe/Paris" })},
		admitCase{name: "cron-timezone-invalid", obj: newCron("cron-tz-bad", func(s *v1alpha1.CronScheduleSpec) { s.TimeZone = "Mars/Olympus_Mons" }),
			wantErr: []string{"spec.timeZone: Invalid value: \"Mars/Olympus_Mons\"", "IANA time zone"}},
		admitCase{name: "cron-params-inside", obj: newCron("cron-params-in", func(s *v1alpha1.CronScheduleSpec) {
			s.Target = v1alpha1.CronTarget{WorkflowRef: &v1alpha1.LocalObjectReference{Name: "sched-ok"}, Params: params(paramsMax)}
		}), wantWarn: []string{"spec.target.params", "limit workflow_params_bytes"}},
		admitCase{name: "cron-params-outside", obj: newCron("cron-params-out", func(s *v1alpha1.CronScheduleSpec) {
			s.Target = v1alpha1.CronTarget{WorkflowRef: &v1alpha1.LocalObjectReference{Name: "sched-ok"}, Params: params(paramsMax + 1)}
		}), wantErr: []string{"spec.target.params: Invalid value: " + fmt.Sprint(paramsMax+1), "limit workflow_params_bytes", "source: " + paramsL.Source}},
		admitCase{name: "cron-workflow-missing-warns", obj: newCron("cron-wf-missing", func(s *v1alpha1.CronScheduleSpec) {
			s.Target = v1alpha1.CronTarget{WorkflowRef: &v1alpha1.LocalObjectReference{Name: "wf-later"}}
		}), wantWarn: []string{"spec.target.workflowRef.name", "Workflow wh/wf-later does not exist yet"}},
	)
	// The cluster admin's policy (policy_test.go).
	return append(cs, policyCases()...)
}

// userWorkerName is a Worker name of n characters.
func userWorkerName(n int) string { return "user-" + strings.Repeat("w", n-len("user-")) }

// cronOfLength returns an expression of exactly n (≥ 10) characters: a minute list
// "[0]10,0,0,..." and " * * * *".
func cronOfLength(n int64) string {
	minutes := "10"
	for int64(len(minutes))+2 <= n-8 {
		minutes += ",0"
	}
	if int64(len(minutes)) < n-8 {
		minutes = "0" + minutes // "010"
	}
	return minutes + " * * * *"
}

// hyphenated is a flag of the pinned workerd with a hyphen in its name and the date
// at which setting it is valid: an enable flag before its date, another flag at any
// date (the CRD's flag pattern must admit it).
var hyphenated, hyphenatedDate = func() (string, string) {
	for _, f := range pinnedCompatFields {
		for _, fl := range f.flags {
			if !strings.Contains(fl, "-") || f.experimental == fl || f.allDates {
				continue
			}
			if fl == f.enable && f.date != "" {
				return fl, dayBefore(f.date)
			}
			if fl != f.enable && f.date != "" {
				return fl, f.date
			}
		}
	}
	return "", ""
}()

// contradictory is a field of the pinned workerd set by two flags; dated one with an
// enable flag that became the default on a date (neither experimental).
var contradictory, dated = func() (contra, dat compatField) {
	for _, f := range pinnedCompatFields {
		if contra.field == "" && len(f.flags) == 2 && f.experimental == "" && !strings.Contains(f.field, "python") {
			contra = f
		}
		if dat.field == "" && f.enable != "" && f.date != "" && !f.allDates && f.experimental == "" && f.date > "2024-01-01" {
			dat = f
		}
	}
	return contra, dat
}()

func dayBefore(date string) string {
	d, _ := time.Parse(time.DateOnly, date)
	return d.AddDate(0, 0, -1).Format(time.DateOnly)
}

func dayAfter(date string) string {
	var y, m, d int
	fmt.Sscanf(date, "%d-%d-%d", &y, &m, &d)
	return fmt.Sprintf("%04d-%02d-%02d", y, m, d+1) // test dates are never month ends
}

// TestAdmission runs the table through the real API server with the webhooks installed.
func TestAdmission(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	// The Workers whose profile Workflows and DurableObjectNamespaces run under, and the
	// ConfigMap one size case reads.
	for _, p := range limits.Profiles {
		if err := s.c.Create(ctx, newWorker(profileWorker(p), p, nil)); err != nil {
			t.Fatal(err)
		}
	}
	size := s.table.Get(limits.Custom, limits.ScriptSizeBytes)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big-bundle", Namespace: testNS},
		Data: map[string]string{"worker.js": strings.Repeat("/", int(size)-9), "lib.js": "//lib.js\n"}, BinaryData: map[string][]byte{"x.bin": {0}}}
	if err := s.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	s.warns.take()
	all := cases(s.table)
	if len(all) < 60 {
		t.Fatalf("%d cases, want at least 60", len(all))
	}
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			s.warns.take()
			err := s.c.Create(ctx, c.obj)
			if c.update != nil {
				if err != nil {
					t.Fatalf("create before update: %v", err)
				}
				c.update(c.obj)
				err = s.c.Update(ctx, c.obj)
			}
			warns := s.warns.take()
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
			} else {
				if err == nil {
					t.Fatalf("admitted; want an error with %q", c.wantErr)
				}
				for _, want := range c.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error lacks %q:\n%v", want, err)
					}
				}
			}
			if c.wantWarn != nil && !anyContainsAll(warns, c.wantWarn) {
				t.Errorf("no warning with all of %q; warnings: %q", c.wantWarn, warns)
			}
			if c.wantNoWarn != "" && anyContainsAll(warns, []string{c.wantNoWarn}) {
				t.Errorf("a warning names %s, whose value is the default: %q", c.wantNoWarn, warns)
			}
		})
	}
}

func anyContainsAll(msgs []string, subs []string) bool {
	for _, m := range msgs {
		ok := true
		for _, s := range subs {
			if !strings.Contains(m, s) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestDefaultingThroughAPIServer creates objects through the API server and reads them
// back: defaults are present, a field unknown to the Go types survives, and the
// quantities the user wrote are stored byte for byte.
func TestDefaultingThroughAPIServer(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.workerd-operator.io/v1alpha1", "kind": "Worker",
		"metadata": map[string]any{"name": "unknown-field", "namespace": testNS},
		"spec": map[string]any{
			"futureField":       map[string]any{"keep": "me", "n": int64(7)},
			"compatibilityDate": "2026-11-01",
			"source":            map[string]any{"inline": map[string]any{"modules": []any{map[string]any{"name": "w.js", "type": "ESModule", "content": "export default {}"}}}},
			"pod":               map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "1000m", "memory": "134217728"}, "requests": map[string]any{"cpu": "0.5"}}},
		},
	}}
	if err := s.c.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		path []string
		want any
	}{
		{[]string{"spec", "futureField", "keep"}, "me"},
		{[]string{"spec", "futureField", "n"}, int64(7)},
		{[]string{"spec", "pod", "resources", "limits", "cpu"}, "1000m"},
		{[]string{"spec", "pod", "resources", "limits", "memory"}, "134217728"},
		{[]string{"spec", "pod", "resources", "requests", "cpu"}, "0.5"},
		{[]string{"spec", "replicas"}, int64(1)},
		{[]string{"spec", "limits", "profile"}, string(limits.DefaultProfile)},
		{[]string{"spec", "limits", "cpuMs"}, limits.Get(limits.DefaultProfile, limits.CPUMsDefault)},
		{[]string{"spec", "limits", "subrequests"}, limits.Get(limits.DefaultProfile, limits.SubrequestsDefault)},
		{[]string{"spec", "limits", "memoryMiB"}, limits.Get(limits.DefaultProfile, limits.MemoryMiBDefault)},
	}
	for _, c := range checks {
		v, found, err := unstructured.NestedFieldNoCopy(got.Object, c.path...)
		if err != nil || !found || fmt.Sprint(v) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v (found %v, err %v), want %v", strings.Join(c.path, "."), v, found, err, c.want)
		}
	}

	// A Workflow under the free Worker gets the free step default; a DON its channel limits.
	if err := s.c.Create(ctx, newWorker("dflt-free", limits.Free, nil)); err != nil {
		t.Fatal(err)
	}
	wf := &v1alpha1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "dflt-wf", Namespace: testNS},
		Spec: v1alpha1.WorkflowSpec{WorkerRef: v1alpha1.LocalObjectReference{Name: "dflt-free"}, ClassName: "Flow"}}
	if err := s.c.Create(ctx, wf); err != nil {
		t.Fatal(err)
	}
	if wf.Spec.Limits == nil || wf.Spec.Limits.Steps == nil || int64(*wf.Spec.Limits.Steps) != limits.Get(limits.Free, limits.WorkflowStepsDefault) {
		t.Errorf("workflow steps default = %v, want %d", wf.Spec.Limits, limits.Get(limits.Free, limits.WorkflowStepsDefault))
	}
	if d := wf.Spec.Defaults; d == nil || d.Timeout != duration.Format(limits.Get(limits.Paid, limits.WorkflowStepTimeoutMs)) ||
		d.Retries == nil || d.Retries.Delay != duration.Format(limits.Get(limits.Paid, limits.WorkflowRetryDelayMs)) ||
		d.Retries.Backoff != v1alpha1.BackoffExponential || int64(*d.Retries.Limit) != limits.Get(limits.Paid, limits.WorkflowRetryLimit) {
		t.Errorf("workflow step defaults = %+v", d)
	}
	don := newDON("dflt-don", limits.Paid, func(s *v1alpha1.DurableObjectNamespaceSpec) { s.Channels = &v1alpha1.ChannelsSpec{Enabled: true} })
	if err := s.c.Create(ctx, don); err != nil {
		t.Fatal(err)
	}
	if ch := don.Spec.Channels; *don.Spec.Shards != 1 || ch.Binding != DefaultChannelsBinding ||
		int64(*ch.MaxChannels) != limits.Get(limits.Paid, limits.ChannelsPerObject) ||
		int64(*ch.MaxBacklogBytes) != limits.Get(limits.Paid, limits.ChannelBacklogBytes) {
		t.Errorf("DON defaults = shards %d, channels %+v", *don.Spec.Shards, ch)
	}
}

// TestReferenceJustCreated: the reference checks read the manager's cache, which lags a
// just-created object; a miss is confirmed with the API reader, so an object created
// right before the one referencing it draws no "does not exist yet" warning.
func TestReferenceJustCreated(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	om := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: testNS} }
	for _, c := range []struct {
		name       string
		referenced client.Object
		mut        func(*v1alpha1.WorkerSpec)
	}{
		{"secret", &corev1.Secret{ObjectMeta: om("fresh-token"), StringData: map[string]string{"t": "x"}}, func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "TOKEN", SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "fresh-token"}, Key: "t"}}}
		}},
		{"configmap", &corev1.ConfigMap{ObjectMeta: om("fresh-bundle"), Data: map[string]string{"worker.js": "export default {}"}}, func(s *v1alpha1.WorkerSpec) {
			s.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "fresh-bundle", Main: "worker.js"}}
		}},
		{"worker", newWorker("fresh-api", limits.Paid, nil), func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "API", Service: &v1alpha1.ServiceBinding{Name: "fresh-api"}}}
		}},
		{"durable-object-namespace", newDON("fresh-rooms", limits.Paid, nil), func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "ROOMS", DurableObjectNamespace: &v1alpha1.LocalObjectReference{Name: "fresh-rooms"}}}
		}},
		{"workflow", newWorkflow("fresh-flow", limits.Paid, nil), func(s *v1alpha1.WorkerSpec) {
			s.Bindings = []v1alpha1.Binding{{Name: "FLOW", Workflow: &v1alpha1.LocalObjectReference{Name: "fresh-flow"}}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := s.c.Create(ctx, c.referenced); err != nil {
				t.Fatal(err)
			}
			s.warns.take()
			if err := s.c.Create(ctx, newWorker("uses-fresh-"+c.name, limits.Paid, c.mut)); err != nil {
				t.Fatalf("rejected: %v", err)
			}
			for _, w := range s.warns.take() {
				if strings.Contains(w, "does not exist yet") || strings.Contains(w, "could not") {
					t.Errorf("warning for an existing %s: %q", c.name, w)
				}
			}
		})
	}
}
