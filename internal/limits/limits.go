package limits

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Profile names a set of limit values. It matches the API's LimitProfile
// (spec.limits.profile of a Worker).
type Profile string

// Profiles. Paid is the default profile when none is set.
const (
	Free   Profile = "free"
	Paid   Profile = "paid"
	Custom Profile = "custom"
)

// DefaultProfile is the profile used when an object names none.
const DefaultProfile = Paid

// Profiles lists the profiles in table order.
var Profiles = []Profile{Free, Paid, Custom}

// ParseProfile returns the Profile named s; "" gives DefaultProfile.
// Errors: any other name.
func ParseProfile(s string) (Profile, error) {
	switch Profile(s) {
	case "":
		return DefaultProfile, nil
	case Free, Paid, Custom:
		return Profile(s), nil
	}
	return "", fmt.Errorf("limits: unknown profile %q (want free, paid or custom)", s)
}

// Provenance says how a value is known.
type Provenance string

// Provenances.
const (
	Documented Provenance = "documented"
	Measured   Provenance = "measured"
)

// Enforcement says which part of the product enforces a limit.
type Enforcement string

// Enforcements (docs/limits.md explains each).
const (
	Admission   Enforcement = "admission"    // the admission webhook rejects spec values over it
	Sidecar     Enforcement = "sidecar"      // the sidecar (workflow engine, channels) enforces it at run time
	Pod         Enforcement = "pod"          // the pod: V8 heap flag, container limits, or workerd's compiled-in limit
	Dispatcher  Enforcement = "dispatcher"   // the cron dispatcher cancels a run over it
	NotEnforced Enforcement = "not enforced" // nothing in the product enforces it (documented only)
)

// Unit of a limit's values.
type Unit string

// Units. Values are int64 in these units.
const (
	Milliseconds Unit = "ms"
	Bytes        Unit = "bytes"
	MiB          Unit = "MiB"
	Count        Unit = "count"
	Characters   Unit = "characters"
)

// Name identifies a limit. The names follow Cloudflare's configuration keys where one
// exists (limits.cpu_ms → "cpu_ms").
type Name string

// Limit names. See the table (All) for values, units and sources.
const (
	// Workers (per invocation / per isolate / per Worker).
	CPUMs                 Name = "cpu_ms"
	CPUMsDefault          Name = "cpu_ms_default"
	Subrequests           Name = "subrequests"
	SubrequestsDefault    Name = "subrequests_default"
	SubrequestsInternal   Name = "subrequests_cloudflare_services"
	MemoryMiB             Name = "memory_mib"
	MemoryMiBDefault      Name = "memory_mib_default"
	StartupMs             Name = "startup_ms"
	WaitUntilMs           Name = "wait_until_ms"
	OutboundConnections   Name = "outbound_connections"
	LoopInvocations       Name = "loop_invocations"
	EnvVars               Name = "env_vars"
	EnvVarBytes           Name = "env_var_bytes"
	ScriptSizeBytes       Name = "script_size_bytes"
	ScriptSize2024Bytes   Name = "script_size_2024_uncompressed_bytes"
	ScriptSize2024GzBytes Name = "script_size_2024_gzip_bytes"
	InlineSourceBytes     Name = "inline_source_bytes"

	// Static assets (spec.assets, docs/assets.md).
	AssetFiles              Name = "asset_files"
	AssetFileBytes          Name = "asset_file_bytes"
	AssetHeaderRules        Name = "asset_header_rules"
	AssetHeaderLineChars    Name = "asset_header_line_chars"
	AssetStaticRedirects    Name = "asset_static_redirects"
	AssetDynamicRedirects   Name = "asset_dynamic_redirects"
	AssetRedirectChars      Name = "asset_redirect_chars"
	AssetRunWorkerFirstRule Name = "asset_run_worker_first_rules"

	// Cron Triggers.
	CronCPUMsUnder1h   Name = "cron_cpu_ms_interval_under_1h"
	CronCPUMs1hOrMore  Name = "cron_cpu_ms_interval_1h_or_more"
	CronWallTimeMs     Name = "cron_wall_time_ms"
	CronExpressionChar Name = "cron_expression_chars"

	// Workflows.
	WorkflowSteps            Name = "workflow_steps"
	WorkflowStepsDefault     Name = "workflow_steps_default"
	WorkflowRunningInstances Name = "workflow_running_instances"
	WorkflowStepResultBytes  Name = "workflow_step_result_bytes"
	WorkflowParamsBytes      Name = "workflow_params_bytes"
	WorkflowBatchBytes       Name = "workflow_batch_bytes"
	WorkflowSleepMs          Name = "workflow_sleep_ms"
	WorkflowRetriesPerStep   Name = "workflow_retries_per_step"
	WorkflowStepNameChars    Name = "workflow_step_name_chars"
	WorkflowInstanceIDChars  Name = "workflow_instance_id_chars"
	WorkflowEventTypeChars   Name = "workflow_event_type_chars"
	WorkflowRetentionMs      Name = "workflow_retention_ms"
	WorkflowStepTimeoutMs    Name = "workflow_step_timeout_default_ms"
	WorkflowRetryLimit       Name = "workflow_retry_limit_default"
	WorkflowRetryDelayMs     Name = "workflow_retry_delay_default_ms"

	// Durable channels (docs/channels.md).
	ChannelsPerObject     Name = "channels_per_object"
	SubscribersPerChannel Name = "subscribers_per_channel"
	ChannelMessageBytes   Name = "channel_message_bytes"
	ChannelBacklogBytes   Name = "channel_backlog_bytes"

	// Durable Object constants.
	DOChunkBytes              Name = "do_chunk_bytes"
	DOTxBlobBytes             Name = "do_tx_blob_bytes"
	DOTxLogicalRows           Name = "do_tx_logical_rows"
	DOTxSQLExecs              Name = "do_tx_sql_execs"
	DOSQLRowBytes             Name = "do_sql_row_bytes"
	DOSQLStatementBytes       Name = "do_sql_statement_bytes"
	DOSQLBoundParameters      Name = "do_sql_bound_parameters"
	DOStorageBytes            Name = "do_storage_bytes"
	DOBlockConcurrencyMs      Name = "do_block_concurrency_ms"
	DOWebSocketAttachmentByte Name = "do_websocket_attachment_bytes"
	DOWebSocketMessageBytes   Name = "do_websocket_message_bytes"
	DORPCSafePayloadBytes     Name = "do_rpc_safe_payload_bytes"
)

// Sources a limit cites: the public page its number comes from, or the document in
// this repository that states it (docs/ paths are relative to the repository root).
const (
	DocWorkersLimits   = "https://developers.cloudflare.com/workers/platform/limits/"
	DocWorkersContext  = "https://developers.cloudflare.com/workers/runtime-apis/context/"
	DocWorkersErrors   = "https://developers.cloudflare.com/workers/observability/errors/#loop-limit"
	DocWorkflowsLimits = "https://developers.cloudflare.com/workflows/reference/limits/"
	DocWorkflowsAPI    = "https://developers.cloudflare.com/workflows/build/workers-api/"
	DocCronTriggers    = "https://developers.cloudflare.com/workers/configuration/cron-triggers/"
	DocDOLimits        = "https://developers.cloudflare.com/durable-objects/platform/limits/"
	DocEtcdLimits      = "https://etcd.io/docs/v3.5/dev-guide/limit/"
	DocAssetsHeaders   = "https://developers.cloudflare.com/workers/static-assets/headers/"
	DocAssetsRedirects = "https://developers.cloudflare.com/workers/static-assets/redirects/"
	// DocAssets states the limits Wrangler checks that the Cloudflare docs give no
	// number for (run_worker_first), with Wrangler's source.
	DocAssets = "docs/assets.md"
	// DocWorkflowsTypes is workerd's published type definitions of the Workflow
	// binding (@cloudflare/workers-types), whose comments state createBatch's limits.
	DocWorkflowsTypes = "https://github.com/cloudflare/workerd/blob/main/types/defines/workflows.d.ts"

	// DocChannels is the durable channel contract, whose limits the operator sets.
	DocChannels = "docs/channels.md"
	// DocMeasured lists the Durable Object constants measured on Cloudflare rather
	// than documented by it.
	DocMeasured = "docs/benchmarks.md"
)

// Limit is one row of the table.
type Limit struct {
	// Name is the limit's key.
	Name Name
	// Description says what is limited, in one sentence.
	Description string
	// Unit of Values.
	Unit Unit
	// Values per profile. For the custom profile this is the default ceiling, which an
	// operator may change (LoadCustom).
	Values map[Profile]int64
	// Pattern is a regular expression a string must also match (identifier rules).
	Pattern string
	// Source is where the values come from: a public documentation URL, or a document
	// in docs/ of this repository (DocChannels, DocMeasured).
	Source string
	// Provenance: documented or measured.
	Provenance Provenance
	// Enforcement: which part of the product enforces it.
	Enforcement Enforcement
	// How says concretely how it is enforced (or why not).
	How string
	// History notes earlier documented values and conflicts decided.
	History string
	// OperatorCeiling is true when Values[Custom] is the operator's ceiling rather than
	// the documented one (Table.Limit sets it; SourceFor says so under custom).
	OperatorCeiling bool
	// API is the spec field this limit caps when the field's CRD schema has a
	// maximum; nil when there is none. A custom ceiling above API.Max could never be
	// used (the API server rejects larger values before admission), so LoadCustom
	// refuses it.
	API *APIField
}

// APIField is a spec field bounded by its CRD schema (a kubebuilder Maximum marker in
// api/v1alpha1; TestAPIFieldsMatchCRDs checks the two agree).
type APIField struct {
	// Kind is the custom resource's kind, e.g. "Worker".
	Kind string
	// Path is the field's path in the object, e.g. "spec.limits.cpuMs".
	Path string
	// Max is the field's schema maximum, in the limit's unit (Items: its maxItems).
	Max int64
	// Items says Max bounds the length of a list field rather than its value.
	Items bool
}

// Rule is the CEL rule (x-kubernetes-validations) the field's kubebuilder XValidation
// marker carries next to its Maximum marker, "self <= 300000", or "" for a list
// (Items): the API server skips CEL rules once a list is over its maxItems, so a rule
// could never add its message there.
func (f *APIField) Rule() string {
	if f.Items {
		return ""
	}
	return fmt.Sprintf("self <= %d", f.Max)
}

// APIMessage is the message of the field's CEL rule (see Rule): the API server's
// rejection of a value above the schema maximum, before any admission webhook runs,
// names the limit and its source like the webhook's rejections do, e.g.
// `must be at most 300000 (the API maximum, for every profile; limit cpu_ms; source: https://developers.cloudflare.com/workers/platform/limits/)`.
// The error's field path and value come from the API server. "" when Rule is "".
func (l Limit) APIMessage() string {
	if l.API == nil || l.API.Rule() == "" {
		return ""
	}
	return fmt.Sprintf("must be at most %d (the API maximum, for every profile; limit %s; source: %s)", l.API.Max, l.Name, l.Source)
}

// Cite returns the text an error message carries for this limit under profile p:
// `profile "paid"; limit cpu_ms; source: https://developers.cloudflare.com/workers/platform/limits/`
// (SourceFor(p)).
func (l Limit) Cite(p Profile) string {
	return fmt.Sprintf("profile %q; limit %s; source: %s", p, l.Name, l.SourceFor(p))
}

// SourceFor returns where the value under profile p comes from: Source, noted as the
// operator's own under the custom profile when the operator set that ceiling (it
// changes no other profile's value).
func (l Limit) SourceFor(p Profile) string {
	if p == Custom && l.OperatorCeiling {
		return l.Source + " (custom ceiling set by the operator)"
	}
	return l.Source
}

const (
	kib = 1024
	mib = 1024 * 1024
	sec = 1000
	min = 60 * sec
	day = 24 * 60 * min
)

func same(v int64) map[Profile]int64 { return map[Profile]int64{Free: v, Paid: v, Custom: v} }

func per(free, paid, custom int64) map[Profile]int64 {
	return map[Profile]int64{Free: free, Paid: paid, Custom: custom}
}

// table is the documented table, in document order.
var table = []Limit{
	{Name: CPUMs, Description: "Maximum CPU time per invocation (HTTP request, DO request, workflow step); spec.limits.cpuMs may not exceed it.", Unit: Milliseconds,
		Values: per(10, 300000, 300000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission caps spec.limits.cpuMs; at run time the pod's CPU limit bounds CPU, workerd has no per-request CPU limit",
		History: "Free cannot set cpu_ms on Cloudflare (error 100328); the operator admits values up to 10 on Free. Paid maximum 300000 since 2025-03-25 (was 30000).",
		API:     &APIField{Kind: "Worker", Path: "spec.limits.cpuMs", Max: 300000}},
	{Name: CPUMsDefault, Description: "CPU time per invocation when spec.limits.cpuMs is unset (the defaulter writes it).", Unit: Milliseconds,
		Values: per(10, 30000, 30000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How: "the defaulting webhook adds spec.limits.cpuMs with this value"},
	{Name: Subrequests, Description: "Maximum subrequests per invocation; spec.limits.subrequests may not exceed it.", Unit: Count,
		Values: per(50, 10000000, 10000000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission caps spec.limits.subrequests; counting at run time is not enforced (workerd's newSubrequest() is a no-op)",
		History: "Free: 50 external and 1,000 to Cloudflare services; the operator cannot tell them apart and uses 50. Paid 1,000 until early 2026, then default 10,000 / max 10,000,000 (wrangler 4.62.0).",
		API:     &APIField{Kind: "Worker", Path: "spec.limits.subrequests", Max: 10000000}},
	{Name: SubrequestsDefault, Description: "Subrequests per invocation when spec.limits.subrequests is unset.", Unit: Count,
		Values: per(50, 10000, 10000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How: "the defaulting webhook adds spec.limits.subrequests with this value"},
	{Name: SubrequestsInternal, Description: "Subrequests per invocation to Cloudflare services (KV, R2, D1...); on Paid the configured subrequests limit applies.", Unit: Count,
		Values: per(1000, 10000000, 10000000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: NotEnforced,
		How: "not enforced: calls to KVNamespace, D1Database and Queue bindings (docs/kv.md) are not counted"},
	{Name: MemoryMiB, Description: "Memory per isolate (JS heap + Wasm); spec.limits.memoryMiB may not exceed it.", Unit: MiB,
		Values: per(128, 128, 4096), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Pod,
		How:     "admission caps spec.limits.memoryMiB; the pod sets V8 --max-old-space-size and the container memory limit from it",
		History: "Cloudflare documents 128 MB; the operator reads it as 128 MiB. Above 128 needs the custom profile (ceiling 4096, the CRD maximum).",
		API:     &APIField{Kind: "Worker", Path: "spec.limits.memoryMiB", Max: 4096}},
	{Name: MemoryMiBDefault, Description: "Memory per isolate when spec.limits.memoryMiB is unset.", Unit: MiB,
		Values: same(128), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Pod,
		How: "the defaulting webhook adds spec.limits.memoryMiB; the pod enforces it as above"},
	{Name: StartupMs, Description: "Startup time: parsing and executing the global scope.", Unit: Milliseconds,
		Values: same(1000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: NotEnforced,
		How:     "not enforced: workerd has no startup limit; a slow start shows as a late readiness probe",
		History: "1 s since 2025-10-10; 400 ms before, 200 ms earlier."},
	{Name: WaitUntilMs, Description: "How long ctx.waitUntil() work may run after the response is sent or the client disconnects.", Unit: Milliseconds,
		Values: same(30000), Source: DocWorkersContext, Provenance: Documented, Enforcement: NotEnforced,
		How: "not enforced: workerd's limitDrain() never fires; a pod's termination grace period bounds drain on shutdown only"},
	{Name: OutboundConnections, Description: "Simultaneous outbound connections waiting for response headers per invocation; the 7th waits.", Unit: Count,
		Values: same(6), Source: DocWorkersLimits, Provenance: Documented, Enforcement: NotEnforced,
		How: "not enforced: workerd does not queue outbound connections"},
	{Name: LoopInvocations, Description: "Invocations of Workers one request may chain (a Worker calling itself or another Worker); CF-EW-Via counts those left, the next one fails with error 1019.", Unit: Count,
		Values: same(16), Source: DocWorkersErrors, Provenance: Documented, Enforcement: Pod,
		How: "the ingress shim in front of every Worker's http socket answers error 1019 when CF-EW-Via says none is left, and passes the count on decremented; service bindings and Durable Object calls are not counted"},
	{Name: EnvVars, Description: "Environment variables (text, json and secretKeyRef bindings) per Worker.", Unit: Count,
		Values: per(64, 128, 128), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How: "admission counts spec.bindings with text, json or secretKeyRef (Cloudflare errors 10054/10055)",
		API: &APIField{Kind: "Worker", Path: "spec.bindings", Max: 128, Items: true}},
	{Name: EnvVarBytes, Description: "Size of one environment variable's value.", Unit: Bytes,
		Values: same(5 * kib), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission checks text and json values (UTF-8 bytes); Secret values are checked by the controller",
		History: "Cloudflare documents 5 KB; the operator reads it as 5 KiB (5120 bytes)."},
	{Name: ScriptSizeBytes, Description: "Worker size: the sum of all modules, uncompressed (current rule, no compressed limit).", Unit: Bytes,
		Values: same(64 * mib), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission sums inline modules and the ConfigMap's keys (base64 decoded); image sources are not checked",
		History: "Generation 2 (cloudflare-docs PRs #31002/#31067, May 2026): 64 MiB uncompressed on all plans. The webhook applies it unless started with script-size rules 2024."},
	{Name: ScriptSize2024Bytes, Description: "Worker size uncompressed under the 2024 rules.", Unit: Bytes,
		Values: same(64 * mib), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission, only with script-size rules 2024",
		History: "Generation 1 (docs 2024-11 to 2026-07-28): 64 MB uncompressed plus the gzip limit below."},
	{Name: ScriptSize2024GzBytes, Description: "Worker size after gzip under the 2024 rules.", Unit: Bytes,
		Values: per(3*mib, 10*mib, 10*mib), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission gzips the modules (default level) and compares, only with script-size rules 2024",
		History: "Free 1 MB until about 2024-11 (cloudflare-docs PR #18400), then 3 MB; Paid 10 MB. Removed in May 2026 (generation 2)."},
	{Name: InlineSourceBytes, Description: "Size of spec.source.inline as the Worker object stores it (the modules' content and contentBase64 text): the whole object must fit etcd's request limit, so a larger bundle goes in spec.source.image (a ConfigMap holds at most 1 MiB too).", Unit: Bytes,
		Values: same(1 * mib), Source: DocEtcdLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission sums the inline modules' content and contentBase64 strings; without the check a larger Worker is refused by etcd after admission with 'rpc error: code = ResourceExhausted', which names no field",
		History: "etcd's default request limit (--max-request-bytes) is 1.5 MiB; 1 MiB leaves the rest for the Worker's other fields and metadata. Measured against the envtest etcd: a 2 MiB inline source fails at etcd, a 4 MiB one at the API server's 3 MiB request-body limit. Client-side kubectl apply also copies the object into an annotation limited to 256 KiB: use kubectl apply --server-side for larger inline sources."},
	{Name: AssetFiles, Description: "Files in a Worker's static assets (one version).", Unit: Count,
		Values: per(20000, 100000, 100000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: NotEnforced,
		How: "not enforced: the files are in spec.assets.image, which admission cannot see, and workerd serves any number"},
	{Name: AssetFileBytes, Description: "Size of one static asset file.", Unit: Bytes,
		Values: same(25 * mib), Source: DocWorkersLimits, Provenance: Documented, Enforcement: NotEnforced,
		How: "not enforced: the files are in spec.assets.image, which admission cannot see"},
	{Name: AssetHeaderRules, Description: "Rules (URL patterns) in a _headers file (spec.assets.headers).", Unit: Count,
		Values: same(100), Source: DocAssetsHeaders, Provenance: Documented, Enforcement: Admission,
		How: "admission counts the lines that start a rule"},
	{Name: AssetHeaderLineChars, Description: "Length of one line of a _headers file, spacing, name and value included.", Unit: Characters,
		Values: same(2000), Source: DocAssetsHeaders, Provenance: Documented, Enforcement: Admission,
		How: "admission measures every line"},
	{Name: AssetStaticRedirects, Description: "Static rules (no splat, no placeholder) in a _redirects file (spec.assets.redirects).", Unit: Count,
		Values: same(2000), Source: DocAssetsRedirects, Provenance: Documented, Enforcement: Admission,
		How: "admission counts them"},
	{Name: AssetDynamicRedirects, Description: "Dynamic rules (a splat * or a :placeholder in the source) in a _redirects file.", Unit: Count,
		Values: same(100), Source: DocAssetsRedirects, Provenance: Documented, Enforcement: Admission,
		How: "admission counts them"},
	{Name: AssetRedirectChars, Description: "Length of one _redirects rule.", Unit: Characters,
		Values: same(1000), Source: DocAssetsRedirects, Provenance: Documented, Enforcement: Admission,
		How: "admission measures every rule"},
	{Name: AssetRunWorkerFirstRule, Description: "Route patterns in run_worker_first (spec.assets.runWorkerFirst), each at most 100 characters.", Unit: Count,
		Values: same(100), Source: DocAssets, Provenance: Documented, Enforcement: Admission,
		How: "the CRD schema (maxItems 100, items maxLength 100)",
		API: &APIField{Kind: "Worker", Path: "spec.assets.runWorkerFirst", Max: 100, Items: true}},
	{Name: CronCPUMsUnder1h, Description: "CPU time per Cron Trigger invocation when the schedule fires more often than hourly.", Unit: Milliseconds,
		Values: per(10, 30000, 30000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Pod,
		How: "the pod's CPU limit; there is no per-invocation CPU accounting in workerd"},
	{Name: CronCPUMs1hOrMore, Description: "CPU time per Cron Trigger invocation when the schedule interval is 1 hour or more.", Unit: Milliseconds,
		Values: per(10, 900000, 900000), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Pod,
		How: "the pod's CPU limit; there is no per-invocation CPU accounting in workerd"},
	{Name: CronWallTimeMs, Description: "Wall time of one scheduled() invocation (also Queue consumers and DO alarms).", Unit: Milliseconds,
		Values: same(15 * min), Source: DocWorkersLimits, Provenance: Documented, Enforcement: Dispatcher,
		How: "the cron dispatcher cancels the trigger after it and records outcome exceededWallTime"},
	{Name: CronExpressionChar, Description: "Length of one cron expression (CronSchedule and Workflow schedules).", Unit: Characters,
		Values: same(256), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Admission,
		How: "the CRD schema (maxLength) and admission, which parses each expression"},
	{Name: WorkflowSteps, Description: "Maximum steps per workflow instance (sleeps do not count); spec.limits.steps may not exceed it.", Unit: Count,
		Values: per(1024, 25000, 25000), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission caps spec.limits.steps; the sidecar's engine fails an instance at its limit",
		History: "1,024 on all plans from 2025-01-15 until 2026-03-03; since then Paid default 10,000, up to 25,000.",
		API:     &APIField{Kind: "Workflow", Path: "spec.limits.steps", Max: 25000}},
	{Name: WorkflowStepsDefault, Description: "Steps per instance when spec.limits.steps is unset.", Unit: Count,
		Values: per(1024, 10000, 10000), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Sidecar,
		How: "the defaulting webhook adds spec.limits.steps; the sidecar enforces it"},
	{Name: WorkflowRunningInstances, Description: "Concurrently running instances (waiting instances do not count); spec.concurrency.limit may not exceed it.", Unit: Count,
		Values: per(100, 10000, 10000), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Sidecar,
		How:     "admission caps spec.concurrency.limit; the sidecar queues instances above it",
		History: "10,000 on Paid from 2025-10-28; the docs raised it to 50,000 on 2026-04-15. The operator keeps 10,000, the CRD maximum. Free 100.",
		API:     &APIField{Kind: "Workflow", Path: "spec.concurrency.limit", Max: 10000}},
	{Name: WorkflowStepResultBytes, Description: "Size of a step's non-stream result.", Unit: Bytes,
		Values: same(1 * mib), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Sidecar,
		How: "the sidecar's engine rejects larger results (\"output is too large. Maximum allowed size is 1MiB.\")"},
	{Name: WorkflowParamsBytes, Description: "Size of an instance's params / event payload (JSON).", Unit: Bytes,
		Values: same(1 * mib), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Sidecar,
		How: "the sidecar on create/sendEvent; admission for CronSchedule spec.target.params"},
	{Name: WorkflowBatchBytes, Description: "Size of one createBatch call, all its instances together (\"the RPC limit for the batch (1MiB)\").", Unit: Bytes,
		Values: same(1 * mib), Source: DocWorkflowsTypes, Provenance: Documented, Enforcement: Sidecar,
		How: "the sidecar's engine refuses a larger createBatch request body (413, request.too_large) before reading it"},
	{Name: WorkflowSleepMs, Description: "Longest step.sleep, waitForEvent timeout or duration in a Workflow spec.", Unit: Milliseconds,
		Values: same(365 * day), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Sidecar,
		How: "the sidecar rejects longer sleeps; admission rejects longer durations in spec.defaults"},
	{Name: WorkflowRetriesPerStep, Description: "Retries of one step (retries.limit).", Unit: Count,
		Values: same(10000), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Admission,
		How:     "the CRD schema and admission for spec.defaults.retries.limit; the sidecar for per-step configs",
		History: "The 2025 docs allowed Infinity.",
		API:     &APIField{Kind: "Workflow", Path: "spec.defaults.retries.limit", Max: 10000}},
	{Name: WorkflowStepNameChars, Description: "Length of a step name.", Unit: Characters,
		Values: same(256), Source: DocWorkflowsAPI, Provenance: Documented, Enforcement: Sidecar,
		How: "the sidecar's engine rejects longer names"},
	{Name: WorkflowInstanceIDChars, Description: "Length of an instance id; it must match the pattern.", Unit: Characters,
		Values: same(100), Pattern: `^[a-zA-Z0-9_][a-zA-Z0-9-_]*$`, Source: DocWorkflowsAPI, Provenance: Documented, Enforcement: Sidecar,
		How:     "the sidecar's create() rejects other ids (\"Workflow instance has invalid id\")",
		History: "64 characters in 2024."},
	{Name: WorkflowEventTypeChars, Description: "Length of a waitForEvent/sendEvent type; it must match the pattern.", Unit: Characters,
		Values: same(100), Pattern: `^[a-zA-Z0-9_][a-zA-Z0-9-_]*$`, Source: DocWorkflowsAPI, Provenance: Documented, Enforcement: Sidecar,
		How: "the sidecar rejects other types (workflow.invalid_event_type)"},
	{Name: WorkflowRetentionMs, Description: "Longest retention of finished instances (spec.retention.success / error).", Unit: Milliseconds,
		Values: per(3*day, 30*day, 30*day), Source: DocWorkflowsLimits, Provenance: Documented, Enforcement: Admission,
		How:     "admission caps spec.retention; the sidecar deletes finished instances after it",
		History: "Default retention for Workflows created on or after 2026-09-10 is 7 days per the changelog; the API documents 30 days as the default (the operator keeps 30)."},
	{Name: WorkflowStepTimeoutMs, Description: "Timeout of one step attempt when the step config sets none (\"10 minutes\").", Unit: Milliseconds,
		Values: same(10 * min), Source: DocWorkflowsAPI, Provenance: Documented, Enforcement: Sidecar,
		How: "the defaulting webhook adds spec.defaults.timeout; the sidecar cancels an attempt after it"},
	{Name: WorkflowRetryLimit, Description: "Retries of a failed step when the step config sets none.", Unit: Count,
		Values: same(5), Source: DocWorkflowsAPI, Provenance: Documented, Enforcement: Sidecar,
		How:     "the defaulting webhook adds spec.defaults.retries.limit; the sidecar retries up to it (attempts = limit + 1)",
		History: "The docs example calls limit the total number of attempts; the engine counts retries after the first attempt (the operator follows the engine)."},
	{Name: WorkflowRetryDelayMs, Description: "Delay before the first retry when the step config sets none (\"10 seconds\", backoff exponential).", Unit: Milliseconds,
		Values: same(10 * sec), Source: DocWorkflowsAPI, Provenance: Documented, Enforcement: Sidecar,
		How:     "the defaulting webhook adds spec.defaults.retries.delay and backoff; the sidecar waits it",
		History: "The local engine (workers-sdk) uses 1000 ms; the docs say 10000 ms and win."},
	{Name: ChannelsPerObject, Description: "Durable channels per Durable Object instance.", Unit: Count,
		Values: same(64), Source: DocChannels, Provenance: Measured, Enforcement: Sidecar,
		How: "admission caps spec.channels.maxChannels; the channels runtime refuses the 65th",
		API: &APIField{Kind: "DurableObjectNamespace", Path: "spec.channels.maxChannels", Max: 64}},
	{Name: SubscribersPerChannel, Description: "Subscribers per durable channel.", Unit: Count,
		Values: same(256), Source: DocChannels, Provenance: Measured, Enforcement: Sidecar,
		How: "admission caps spec.channels.maxSubscribers; subscribe throws a catchable error at the limit",
		API: &APIField{Kind: "DurableObjectNamespace", Path: "spec.channels.maxSubscribers", Max: 256}},
	{Name: ChannelMessageBytes, Description: "Size of one channel message (UTF-8 bytes).", Unit: Bytes,
		Values: same(64 * kib), Source: DocChannels, Provenance: Measured, Enforcement: Sidecar,
		How: "admission caps spec.channels.maxMessageBytes; publish rejects larger messages",
		API: &APIField{Kind: "DurableObjectNamespace", Path: "spec.channels.maxMessageBytes", Max: 65536}},
	{Name: ChannelBacklogBytes, Description: "Unread backlog per subscriber; over it the subscriber is disconnected.", Unit: Bytes,
		Values: same(1 * mib), Source: DocChannels, Provenance: Measured, Enforcement: Sidecar,
		How: "admission caps spec.channels.maxBacklogBytes; the runtime disconnects the subscriber",
		API: &APIField{Kind: "DurableObjectNamespace", Path: "spec.channels.maxBacklogBytes", Max: 1048576}},
	{Name: DOChunkBytes, Description: "Storage and wire quantum (CHUNK_SIZE).", Unit: Bytes,
		Values: same(64 * kib), Source: DocMeasured, Provenance: Measured, Enforcement: NotEnforced,
		How: "not enforced: a sizing constant for application code"},
	{Name: DOTxBlobBytes, Description: "Bytes one storage transaction may hold outstanding (MAX_TX_BLOB_BYTES).", Unit: Bytes,
		Values: same(1 * mib), Source: DocMeasured, Provenance: Measured, Enforcement: NotEnforced,
		How: "not enforced: Cloudflare resets the object over it; workerd's SQLite does not"},
	{Name: DOTxLogicalRows, Description: "Rows in one storage transaction (MAX_TX_LOGICAL_ROWS).", Unit: Count,
		Values: same(256), Source: DocMeasured, Provenance: Measured, Enforcement: NotEnforced,
		How: "not enforced"},
	{Name: DOTxSQLExecs, Description: "SQL execs in one storage transaction (MAX_TX_SQL_EXECS).", Unit: Count,
		Values: same(64), Source: DocMeasured, Provenance: Measured, Enforcement: NotEnforced,
		How: "not enforced"},
	{Name: DOSQLRowBytes, Description: "Bytes per SQLite row, key included (SQLITE_MAX_ROW_BYTES).", Unit: Bytes,
		Values: same(2000000), Source: DocDOLimits, Provenance: Documented, Enforcement: Pod,
		How:     "workerd's compiled-in SQLITE_LIMIT_LENGTH (4 MiB) in the pod; the 2 MB row bound itself is not enforced",
		History: "Measured single-value ceiling 2,199,981 bytes (docs/benchmarks.md); docs 2 MB; workerd 4 MiB; the operator uses the documented 2 MB."},
	{Name: DOSQLStatementBytes, Description: "SQL text per exec (SQLITE_MAX_STATEMENT_BYTES).", Unit: Bytes,
		Values: same(100 * kib), Source: DocDOLimits, Provenance: Documented, Enforcement: Pod,
		How:     "workerd's compiled-in SQLITE_LIMIT_SQL_LENGTH (100000) in the pod",
		History: "The docs say 100 KB, read as 100 KiB; workerd sets 100,000 bytes."},
	{Name: DOSQLBoundParameters, Description: "Bound parameters per SQL statement (101 fail).", Unit: Count,
		Values: same(100), Source: DocDOLimits, Provenance: Documented, Enforcement: Pod,
		How: "workerd's compiled-in SQLITE_LIMIT_VARIABLE_NUMBER in the pod"},
	{Name: DOStorageBytes, Description: "Storage per Durable Object (10 GB, decimal).", Unit: Bytes,
		Values: same(10000000000), Source: DocDOLimits, Provenance: Documented, Enforcement: NotEnforced,
		How:     "not enforced per object; the shard's volume size (spec.storage) bounds all objects of a shard",
		History: "The DO FAQ says 1 GB on Free; the operator uses 10 GB."},
	{Name: DOBlockConcurrencyMs, Description: "How long a blockConcurrencyWhile() callback may run before the object is reset.", Unit: Milliseconds,
		Values: same(30000), Source: DocMeasured, Provenance: Measured, Enforcement: NotEnforced,
		How: "not enforced: workerd does not reset objects on a timer"},
	{Name: DOWebSocketAttachmentByte, Description: "Serialized bytes per hibernatable WebSocket attachment.", Unit: Bytes,
		Values: same(16 * kib), Source: DocMeasured, Provenance: Measured, Enforcement: Pod,
		How: "workerd enforces it (serializeAttachment throws) in the pod"},
	{Name: DOWebSocketMessageBytes, Description: "Bytes of one received WebSocket message.", Unit: Bytes,
		Values: same(32 * mib), Source: DocDOLimits, Provenance: Documented, Enforcement: Pod,
		How: "workerd closes the socket with 1009 (message too big) at the first pod a larger message reaches (docs/durable-objects.md \"WebSockets\")"},
	{Name: DORPCSafePayloadBytes, Description: "Bytes to send in one RPC value, under the platform's 32 MiB.", Unit: Bytes,
		Values: same(28 * mib), Source: DocMeasured, Provenance: Measured, Enforcement: NotEnforced,
		How: "not enforced: a safety envelope for application code (workerd's own limit is 32 MiB)"},
}

var byName = func() map[Name]int {
	m := make(map[Name]int, len(table))
	for i, l := range table {
		if _, dup := m[l.Name]; dup {
			panic("limits: duplicate limit " + string(l.Name))
		}
		m[l.Name] = i
	}
	return m
}()

// All returns a copy of the documented table in document order (custom values are
// the default ceilings).
func All() []Limit {
	out := make([]Limit, len(table))
	for i, l := range table {
		out[i] = l
		out[i].Values = map[Profile]int64{Free: l.Values[Free], Paid: l.Values[Paid], Custom: l.Values[Custom]}
	}
	return out
}

// Lookup returns the documented limit named n.
func Lookup(n Name) (Limit, bool) {
	i, ok := byName[n]
	if !ok {
		return Limit{}, false
	}
	return table[i], true
}

// Table is the table with the operator's custom ceilings applied. The zero value is
// not usable; use Default or LoadCustom. A Table is read-only after construction and
// safe for concurrent use.
type Table struct {
	custom map[Name]int64
}

var defaultTable = &Table{custom: map[Name]int64{}}

// Default returns the table with the documented custom ceilings.
func Default() *Table { return defaultTable }

// Limit returns limit n as this table sees it: Values[Custom] is the operator's
// ceiling and OperatorCeiling is set when the operator set one (cite it with
// Cite/SourceFor). ok is false for an unknown name.
func (t *Table) Limit(n Name) (Limit, bool) {
	l, ok := Lookup(n)
	if !ok {
		return Limit{}, false
	}
	if v, set := t.custom[n]; set {
		l.Values = map[Profile]int64{Free: l.Values[Free], Paid: l.Values[Paid], Custom: v}
		l.OperatorCeiling = true
	}
	return l, true
}

// Value returns the value of limit n under profile p.
// Errors: unknown limit name or profile.
func (t *Table) Value(p Profile, n Name) (int64, error) {
	l, ok := Lookup(n)
	if !ok {
		return 0, fmt.Errorf("limits: unknown limit %q", n)
	}
	switch p {
	case Free, Paid:
		return l.Values[p], nil
	case Custom:
		if v, set := t.custom[n]; set {
			return v, nil
		}
		return l.Values[Custom], nil
	}
	return 0, fmt.Errorf("limits: unknown profile %q (want free, paid or custom)", p)
}

// Get returns the value of limit n under profile p. It panics on an unknown name or
// profile: names are the package's constants and profiles are validated at the API
// (enum), so either is a programming error.
func (t *Table) Get(p Profile, n Name) int64 {
	v, err := t.Value(p, n)
	if err != nil {
		panic(err)
	}
	return v
}

// Get is Default().Get(p, n): the documented value of limit n under profile p.
func Get(p Profile, n Name) int64 { return defaultTable.Get(p, n) }

// CustomCeilings returns the operator-set custom ceilings (a copy; empty for Default()).
func (t *Table) CustomCeilings() map[Name]int64 {
	out := make(map[Name]int64, len(t.custom))
	for k, v := range t.custom {
		out[k] = v
	}
	return out
}

// LoadCustom builds a Table whose custom profile uses the ceilings in data: a YAML or
// JSON object mapping limit names to values in the limit's unit, e.g.
//
//	cpu_ms: 60000
//	memory_mib: 512
//
// Names not given keep the documented custom ceiling. Errors: malformed document,
// unknown limit name, value < 0, value above the most the API accepts for the field
// the limit caps (Limit.API: the CRD schema's maximum, which no profile can raise).
func LoadCustom(data []byte) (*Table, error) {
	var raw map[string]json.Number
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("limits: custom ceilings: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("limits: custom ceilings: want an object of limit name to integer: %w", err)
	}
	t := &Table{custom: make(map[Name]int64, len(raw))}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := byName[Name(k)]; !ok {
			return nil, fmt.Errorf("limits: custom ceilings: unknown limit %q (see docs/limits.md)", k)
		}
		v, err := raw[k].Int64()
		if err != nil {
			return nil, fmt.Errorf("limits: custom ceilings: %s: %q is not an integer", k, raw[k])
		}
		if v < 0 {
			return nil, fmt.Errorf("limits: custom ceilings: %s: %d is negative", k, v)
		}
		if api := table[byName[Name(k)]].API; api != nil && v > api.Max {
			return nil, fmt.Errorf("limits: custom ceilings: %s: %d is above %d, the most the API accepts for %s %s (its CRD schema maximum): a %s above %d is rejected by the API server whatever the profile", k, v, api.Max, api.Kind, api.Path, api.Path, api.Max)
		}
		t.custom[Name(k)] = v
	}
	return t, nil
}

// LoadCustomFile is LoadCustom on the file at path (e.g. a mounted ConfigMap key).
func LoadCustomFile(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("limits: custom ceilings: %w", err)
	}
	return LoadCustom(b)
}
