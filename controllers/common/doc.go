// Package common is what the reconcilers of controllers/<kind> share: server-side
// apply with the operator's one field owner (Apply), the status write (WriteStatus),
// conditions (Conditions, SetPassConditions) and the end of a pass (Result, with a
// backoff for a pass blocked on a missing input), resolving a Worker and everything
// it references into its rendered config (RenderWorker), the field indexes and the
// mappings from a changed object to the objects that read it (index.go), Events and
// their log lines (Events), and the ready pods of a workload (ReadyPods).
package common
