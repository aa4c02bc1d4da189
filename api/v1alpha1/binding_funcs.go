package v1alpha1

// BindingKind names which value field of a Binding is set; the value is that field's
// JSON name, so "spec.bindings[i]." + kind is the field's path.
type BindingKind string

// Binding kinds, in the order the API documents them.
const (
	BindingText                   BindingKind = "text"
	BindingJSON                   BindingKind = "json"
	BindingSecretKeyRef           BindingKind = "secretKeyRef"
	BindingService                BindingKind = "service"
	BindingDurableObjectNamespace BindingKind = "durableObjectNamespace"
	BindingWorkflow               BindingKind = "workflow"
	BindingKVNamespace            BindingKind = "kvNamespace"
	BindingD1Database             BindingKind = "d1Database"
	BindingQueue                  BindingKind = "queue"
	BindingHyperdrive             BindingKind = "hyperdrive"
	BindingR2Bucket               BindingKind = "r2Bucket"
	BindingAI                     BindingKind = "ai"
	BindingDispatchNamespace      BindingKind = "dispatchNamespace"
)

// Kinds of the objects a binding references (Binding.Reference). Every reference is by
// name in the Worker's namespace, and that name is the field "name" under the kind
// ("secretRef.name" for hyperdrive; Binding.ReferenceField).
const (
	ReferenceSecret                 = "Secret"
	ReferenceWorker                 = "Worker"
	ReferenceDurableObjectNamespace = "DurableObjectNamespace"
	ReferenceWorkflow               = "Workflow"
	ReferenceKVNamespace            = "KVNamespace"
	ReferenceD1Database             = "D1Database"
	ReferenceQueue                  = "Queue"
	ReferenceR2Bucket               = "R2Bucket"
)

// bindingField is what one binding kind is on the API side: which field holds it and
// what the helpers below read from that field.
// +kubebuilder:object:generate=false
type bindingField struct {
	kind BindingKind
	set  func(*Binding) bool
	// envVar: the kind counts against Cloudflare's environment variable limit
	// (https://developers.cloudflare.com/workers/platform/limits/#environment-variables).
	envVar bool
	// value is the inline value of a value kind (text, json).
	value func(*Binding) string
	// object and ref are the kind and name of the object a reference kind names.
	object string
	ref    func(*Binding) string
	// refField is the path of the referenced name under the kind's field; "" is "name".
	refField string
	// optional: a missing referenced object does not block the Worker.
	optional func(*Binding) bool
}

// bindingFields is the one definition of the binding kinds: a new kind is a new field
// on Binding and a new row here (then one type in internal/render).
var bindingFields = []bindingField{
	{kind: BindingText, envVar: true,
		set:   func(b *Binding) bool { return b.Text != nil },
		value: func(b *Binding) string { return *b.Text }},
	{kind: BindingJSON, envVar: true,
		set:   func(b *Binding) bool { return b.JSON != nil },
		value: func(b *Binding) string { return *b.JSON }},
	{kind: BindingSecretKeyRef, envVar: true, object: ReferenceSecret,
		set: func(b *Binding) bool { return b.SecretKeyRef != nil },
		ref: func(b *Binding) string { return b.SecretKeyRef.Name },
		optional: func(b *Binding) bool {
			return b.SecretKeyRef.Optional != nil && *b.SecretKeyRef.Optional
		}},
	{kind: BindingService, object: ReferenceWorker,
		set: func(b *Binding) bool { return b.Service != nil },
		ref: func(b *Binding) string { return b.Service.Name }},
	{kind: BindingDurableObjectNamespace, object: ReferenceDurableObjectNamespace,
		set: func(b *Binding) bool { return b.DurableObjectNamespace != nil },
		ref: func(b *Binding) string { return b.DurableObjectNamespace.Name }},
	{kind: BindingWorkflow, object: ReferenceWorkflow,
		set: func(b *Binding) bool { return b.Workflow != nil },
		ref: func(b *Binding) string { return b.Workflow.Name }},
	{kind: BindingKVNamespace, object: ReferenceKVNamespace,
		set: func(b *Binding) bool { return b.KVNamespace != nil },
		ref: func(b *Binding) string { return b.KVNamespace.Name }},
	{kind: BindingD1Database, object: ReferenceD1Database,
		set: func(b *Binding) bool { return b.D1Database != nil },
		ref: func(b *Binding) string { return b.D1Database.Name }},
	{kind: BindingQueue, object: ReferenceQueue,
		set: func(b *Binding) bool { return b.Queue != nil },
		ref: func(b *Binding) string { return b.Queue.Name }},
	{kind: BindingHyperdrive, object: ReferenceSecret, refField: "secretRef.name",
		set: func(b *Binding) bool { return b.Hyperdrive != nil },
		ref: func(b *Binding) string { return b.Hyperdrive.SecretRef.Name }},
	{kind: BindingR2Bucket, object: ReferenceR2Bucket,
		set: func(b *Binding) bool { return b.R2Bucket != nil },
		ref: func(b *Binding) string { return b.R2Bucket.Name }},
	{kind: BindingAI, object: ReferenceSecret, refField: "secretRef.name",
		set: func(b *Binding) bool { return b.AI != nil },
		ref: func(b *Binding) string { return b.AI.SecretRef.Name }},
	{kind: BindingDispatchNamespace,
		set: func(b *Binding) bool { return b.DispatchNamespace != nil }},
}

// BindingKinds lists every binding kind in the API's order.
func BindingKinds() []BindingKind {
	out := make([]BindingKind, len(bindingFields))
	for i, f := range bindingFields {
		out[i] = f.kind
	}
	return out
}

// Kinds returns the kinds whose field is set on b, in the API's order. Admission lets
// exactly one through; the renderer reports the count of anything else.
func (b Binding) Kinds() []BindingKind {
	var out []BindingKind
	for _, f := range bindingFields {
		if f.set(&b) {
			out = append(out, f.kind)
		}
	}
	return out
}

// Kind is the kind of b: which of its value fields is set. It is "" unless exactly one is.
func (b Binding) Kind() BindingKind {
	if ks := b.Kinds(); len(ks) == 1 {
		return ks[0]
	}
	return ""
}

// IsEnvVar reports whether b counts as an environment variable (text, json and
// secretKeyRef bindings, as Cloudflare counts them).
func (b Binding) IsEnvVar() bool {
	f := b.field()
	return f != nil && f.envVar
}

// Value returns the inline value of a text or json binding; ok is false for other kinds.
func (b Binding) Value() (value string, ok bool) {
	if f := b.field(); f != nil && f.value != nil {
		return f.value(&b), true
	}
	return "", false
}

// Reference returns the kind (ReferenceSecret, ...) and name of the object b names in
// the Worker's namespace; both are "" for a value binding (text, json).
func (b Binding) Reference() (kind, name string) {
	if f := b.field(); f != nil && f.ref != nil {
		return f.object, f.ref(&b)
	}
	return "", ""
}

// ReferenceField is the path, under spec.bindings[i], of the name Reference returns,
// e.g. "service.name" or "hyperdrive.secretRef.name"; "" for a value binding.
func (b Binding) ReferenceField() string {
	f := b.field()
	if f == nil || f.ref == nil {
		return ""
	}
	if f.refField == "" {
		return string(f.kind) + ".name"
	}
	return string(f.kind) + "." + f.refField
}

// Optional reports whether the Worker runs without the object b references: a
// secretKeyRef with optional: true.
func (b Binding) Optional() bool {
	f := b.field()
	return f != nil && f.optional != nil && f.optional(&b)
}

func (b *Binding) field() *bindingField {
	k := b.Kind()
	for i := range bindingFields {
		if bindingFields[i].kind == k {
			return &bindingFields[i]
		}
	}
	return nil
}

// ReferencedNames returns the names of the objects of kind (ReferenceSecret, ...) that
// w's bindings (and, for ReferenceWorker, spec.tails) reference, in spec order.
func (w *Worker) ReferencedNames(kind string) []string {
	var names []string
	for _, b := range w.Spec.Bindings {
		if k, name := b.Reference(); k == kind {
			names = append(names, name)
		}
	}
	if kind == ReferenceWorker {
		// A tail consumer is reached like a service binding's Worker.
		for _, t := range w.Spec.Tails {
			names = append(names, t.Service)
		}
	}
	return names
}
