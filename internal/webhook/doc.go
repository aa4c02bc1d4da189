// Package webhook holds the admission webhooks of the four kinds of
// fleet.workerd-operator.io/v1alpha1: per kind a defaulter
// (admission.Defaulter[*T]) and a validator (admission.Validator[*T]), built from
// small validateX functions that each return a *field.Error. R2Buckets have a
// validator only: an endpoint that is an address in the admin's --outbound-deny is
// refused (r2bucket.go).
//
// Validation covers what the CRDs' OpenAPI/CEL rules cannot: limit-profile ceilings
// read from internal/limits, script size of inline and configMap sources, environment
// variable count and size, JSON validity, compatibility date against the workerd the
// Worker runs, compatibility flags as the pinned workerd checks them at start-up
// (unknown, two flags of one field, an enable flag already the default at the
// compatibilityDate: each makes workerd exit 1; experimental flags only under the
// custom profile; table compatflags_pinned.go, checked against the binary by
// TestCompatFlagsMatchWorkerd), workflow step-config rules, Cloudflare
// cron expressions (internal/cron.Validate) and time zones (a change of a
// DurableObjectNamespace's shards without spec.backup is refused by the CRD's CEL
// rule, docs/scaling.md), and a user Worker's name (spec.dispatchNamespace set) against
// render.MaxUserWorkerName, since its rpc Service's name must be a DNS label
// (docs/dispatch.md), and on a Shared user Worker (spec.dispatchPlacement Shared,
// loaded by its dispatch Workers with workerd's workerLoader) every field an isolate
// without pods of its own cannot have: an image source, assets, bindings other than
// text and json, and the fields of its own pods (validateSharedUserWorker; the
// defaulter gives it no replicas and no memoryMiB). Every rejection names the
// field, the value, the limit, the profile and the source, e.g.
//
//	spec.limits.cpuMs: Invalid value: 300001: must be at most 300000 ms (profile
//	"paid"; limit cpu_ms; source: https://developers.cloudflare.com/workers/platform/limits/)
//
// A value above the CRD schema's maximum never reaches the webhook: the API server
// rejects it first. Those fields also carry a CEL rule whose message is the limit
// table's (limits.Limit.APIMessage), so that rejection names the limit and source too:
//
//	spec.limits.cpuMs: Invalid value: 300001: must be at most 300000 (the API
//	maximum, for every profile; limit cpu_ms; source:
//	https://developers.cloudflare.com/workers/platform/limits/)
//
// The one exception is spec.bindings over its 128 items: the API server skips CEL
// rules on a list over its maxItems, so only its "Too many: 129" error is shown.
//
// References to objects that do not exist yet (Workers, DurableObjectNamespaces,
// Workflows, Secrets, ConfigMaps) are admitted with a warning, since GitOps applies in
// any order; values at 90 % or more of a limit are admitted with a warning (except the
// value the defaulter writes: memoryMiB 128 is both the default and the paid maximum,
// workflow steps 1,024 both the default and the maximum on Free, and a warning on
// every object that sets nothing helps nobody). A rejection under the free or paid
// profile cites the documented source; "custom ceiling set by the operator" is
// cited only under the custom profile, the one such a ceiling changes. These
// reference checks read the manager's cache (typed Workers, DurableObjectNamespaces and
// ConfigMaps, which the controllers watch anyway; metadata-only Secrets and Workflows,
// so no Secret data is cached), and a miss is confirmed with the uncached API reader,
// so a reference created just before the object is not reported missing. An admission
// request therefore costs no API round trip for references that exist.
//
// Defaulting adds only what it defaults: the JSON patch is computed between the typed
// object before and after Default and holds only "add" operations, which are applied
// to the object as the API server sent it, so fields unknown to the Go types are never
// removed and values the user wrote (quantities such as "1000m") are never rewritten.
// controller-runtime's own defaulting handler diffs the request against a Go
// round-trip, which rewrites quantities; SetupWebhooks therefore registers this
// package's add-only handler on the path controller-runtime would use.
//
// Each webhook carries a matchCondition (CEL, evaluated by the API server, a few
// microseconds) so that calls which cannot change the outcome are not made: a mutating
// webhook is called only when a field its defaulter writes is missing, and a
// validating webhook only for creates and for updates that change spec (not for label,
// annotation or finalizer updates). See the marker comment in webhook.go.
package webhook
