// Package limits is the single table of platform limits the operator reproduces:
// Cloudflare Workers, Workflows, Cron Triggers, Durable Objects and durable channels.
// Nothing else in the product hard-codes a limit; the admission webhook, the sidecar and
// the cron dispatcher read their numbers from here, and docs/limits.md is generated
// from the same table (go run ./hack/gen-limits-doc, `make docs`).
//
// Every Limit has a Name, a value per Profile (free, paid — the default — and custom,
// whose ceilings the operator sets), a Unit, a Source (the public documentation page
// the number comes from, or the document in docs/ that states it), a Provenance (documented or
// measured) and an Enforcement saying which part of the product enforces it
// (admission, sidecar, pod, dispatcher) or that nothing does (not enforced).
//
// Reading a value:
//
//	ms := limits.Get(limits.Paid, limits.CPUMs)             // 300000, default table
//	t, err := limits.LoadCustomFile("/etc/workerd-operator/custom-limits.yaml")
//	ms, err = t.Value(limits.Custom, limits.CPUMs)          // operator's ceiling
//	l, _ := limits.Lookup(limits.CPUMs); l.Cite(limits.Paid) // text for error messages
//
// Where Cloudflare's documentation changed over time, or a measurement or workerd
// disagrees with it, the Limit's History says what changed and which value the
// operator uses.
package limits
