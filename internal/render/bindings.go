package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/shim"
)

// bindingKind is how the renderer handles one kind of spec.bindings entry. Render makes
// one per kind for each rendering (newKind in bindingKinds), so a kind may collect what
// its entries need and add it once in contribute. A new binding kind is one type
// implementing this interface and one row in bindingKinds.
type bindingKind interface {
	// bind checks entry b (field is its path, e.g. "spec.bindings[2]") and returns its
	// value in the Worker's bindings list, e.g. `text = "hello"`.
	bind(field string, b v1alpha1.Binding) (string, error)
	// contribute adds what the kind's entries need beyond their values (services,
	// sockets, extension modules, files, container env) once every entry is bound.
	contribute(x *extras) error
}

// bindingKinds is the table of binding kinds, in the API's order; the order is also
// the order in which kinds contribute services, sockets and extension modules.
var bindingKinds = []struct {
	kind    v1alpha1.BindingKind
	newKind func(in Input) (bindingKind, error)
}{
	{v1alpha1.BindingText, valueKind(textKind{})},
	{v1alpha1.BindingJSON, valueKind(jsonKind{})},
	{v1alpha1.BindingSecretKeyRef, func(Input) (bindingKind, error) { return &secretKind{}, nil }},
	{v1alpha1.BindingService, newServiceKind},
	{v1alpha1.BindingDurableObjectNamespace, newDOKind},
	{v1alpha1.BindingWorkflow, newWorkflowKind},
	{v1alpha1.BindingKVNamespace, newDataKind(DataKV)},
	{v1alpha1.BindingD1Database, newDataKind(DataD1)},
	{v1alpha1.BindingQueue, newDataKind(DataQueue)},
	{v1alpha1.BindingHyperdrive, func(Input) (bindingKind, error) { return &hyperdriveKind{}, nil }},
	{v1alpha1.BindingR2Bucket, newR2Kind},
	{v1alpha1.BindingAI, func(Input) (bindingKind, error) { return &aiKind{}, nil }},
	{v1alpha1.BindingDispatchNamespace, newDispatchKind},
}

// kindOf classifies a binding. Only tests replace it, to plug in a kind the API lacks.
var kindOf = v1alpha1.Binding.Kind

// bindingLine is one entry of the user Worker's bindings list.
type bindingLine struct{ name, value string }

// extras is what the bindings add to the config and the pod besides the user
// Worker's modules and the fixed services.
type extras struct {
	// bindings of the user Worker, sorted by name once complete; names maps each
	// spec.bindings name to its index.
	bindings []bindingLine
	names    map[string]int
	// worker holds more fields of the user Worker (a shard pod's hosted class).
	worker capnp
	// services and sockets are more entries of the config's lists.
	services, sockets capnp
	// extensions are internal extension modules.
	extensions []extension
	// files are more rendered files (shims).
	files []File
	// healthBindings are more bindings of the health shim worker (a shard pod's GATEWAY).
	healthBindings []string
	// env is more env of the workerd container, sidecarEnv of the sidecar container.
	env, sidecarEnv []corev1.EnvVar
	// args are more args of workerd; secretVolumes more volumes of the pod.
	args          []string
	secretVolumes []SecretVolume
	// opts are the rendering's Options.
	opts Options
	// httpService is the service of the http socket: the user's Worker, or the assets
	// service in front of it (assets.go). workerService is the service rpc and the
	// trigger shim reach: the user's Worker, or the assets service of an assets-only
	// Worker.
	httpService, workerService string
	// tails are the service designators of spec.tails.
	tails []string
	// split is the gradual deployment the ingress shim keeps (Input.Split).
	split *Split
}

func newExtras() *extras {
	x := &extras{names: map[string]int{}}
	x.worker.depth, x.services.depth, x.sockets.depth = 3, 2, 2
	return x
}

// renderBindings binds every spec.bindings entry through its kind, then lets every kind
// contribute.
func renderBindings(in Input) (*extras, error) {
	kinds := map[v1alpha1.BindingKind]bindingKind{}
	var order []bindingKind
	for _, row := range bindingKinds {
		k, err := row.newKind(in)
		if err != nil {
			return nil, err
		}
		kinds[row.kind] = k
		order = append(order, k)
	}
	x := newExtras()
	x.opts = in.Options
	for i, b := range in.Worker.Spec.Bindings {
		line, err := x.bind(i, b, kinds)
		if err != nil {
			return nil, err
		}
		x.bindings = append(x.bindings, line)
	}
	var err error
	if x.tails, err = renderTails(in.Worker, kinds[v1alpha1.BindingService].(*serviceKind)); err != nil {
		return nil, err
	}
	for _, k := range order {
		if err := k.contribute(x); err != nil {
			return nil, err
		}
	}
	if err := addAssets(in, x); err != nil {
		return nil, err
	}
	sort.Slice(x.bindings, func(i, j int) bool { return x.bindings[i].name < x.bindings[j].name })
	sort.Slice(x.env, func(i, j int) bool { return x.env[i].Name < x.env[j].Name })
	sort.Slice(x.secretVolumes, func(i, j int) bool { return x.secretVolumes[i].Dir < x.secretVolumes[j].Dir })
	sort.Slice(x.sidecarEnv, func(i, j int) bool { return x.sidecarEnv[i].Name < x.sidecarEnv[j].Name })
	return x, nil
}

// bind checks spec.bindings[i]'s name and renders it through its kind.
func (x *extras) bind(i int, b v1alpha1.Binding, kinds map[v1alpha1.BindingKind]bindingKind) (bindingLine, error) {
	field := fmt.Sprintf("spec.bindings[%d]", i)
	if b.Name == "" {
		return bindingLine{}, fmt.Errorf("%s.name: required", field)
	}
	if j, dup := x.names[b.Name]; dup {
		return bindingLine{}, fmt.Errorf("%s.name: duplicate binding %q (also spec.bindings[%d])", field, b.Name, j)
	}
	x.names[b.Name] = i
	k, ok := kinds[kindOf(b)]
	if !ok {
		return bindingLine{}, fmt.Errorf("%s: exactly one of %s must be set (got %d)", field, kindNames(), len(b.Kinds()))
	}
	value, err := k.bind(field, b)
	return bindingLine{b.Name, value}, err
}

// kindNames is "text, json, ... or workflow".
func kindNames() string {
	names := make([]string, len(bindingKinds))
	for i, row := range bindingKinds {
		names[i] = string(row.kind)
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}

// addShims adds the named shim files (internal/shim) to the rendered files.
func (x *extras) addShims(names ...string) error {
	for _, n := range names {
		b, err := shim.Source(n)
		if err != nil {
			return err
		}
		x.files = append(x.files, newFile(podcontract.ShimSubdir+"/"+n, b, false))
	}
	return nil
}

// extension is an internal extension module: its import name and its shim file.
type extension struct{ name, file string }

// addExtension adds an internal extension module embedding shim file.
func (x *extras) addExtension(name, file string) {
	x.extensions = append(x.extensions, extension{name, file})
}

// valueKind makes the table row of a kind that has no state and contributes nothing.
func valueKind(k bindingKind) func(Input) (bindingKind, error) {
	return func(Input) (bindingKind, error) { return k, nil }
}

// contributesNothing is embedded by kinds whose entries need nothing but their value.
type contributesNothing struct{}

func (contributesNothing) contribute(*extras) error { return nil }

// textKind: a plain string (Cloudflare "vars").
type textKind struct{ contributesNothing }

func (textKind) bind(_ string, b v1alpha1.Binding) (string, error) {
	return kv("text", Quote(*b.Text)), nil
}

// jsonKind: a JSON document, compacted; env gets the parsed value.
type jsonKind struct{ contributesNothing }

func (jsonKind) bind(field string, b v1alpha1.Binding) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(*b.JSON)); err != nil {
		return "", fmt.Errorf("%s.json: invalid JSON: %v", field, err)
	}
	return kv("json", Quote(buf.String())), nil
}

// secretKind: a Secret key reaches workerd as the container env var
// WORKERD_SECRET_<name> and a fromEnvironment binding, never through a ConfigMap.
type secretKind struct{ env []corev1.EnvVar }

func (k *secretKind) bind(field string, b v1alpha1.Binding) (string, error) {
	ref := b.SecretKeyRef
	if ref.Name == "" {
		return "", fmt.Errorf("%s.secretKeyRef.name: required", field)
	}
	if ref.Key == "" {
		return "", fmt.Errorf("%s.secretKeyRef.key: required", field)
	}
	env := podcontract.SecretEnvPrefix + b.Name
	k.env = append(k.env, corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref.DeepCopy()}})
	return kv("fromEnvironment", Quote(env)), nil
}

func (k *secretKind) contribute(x *extras) error {
	x.env = append(x.env, k.env...)
	return nil
}

// serviceKind: another Worker of the namespace, through an external service to its rpc
// socket (Input.Services), or the Worker itself.
type serviceKind struct {
	in      Input
	targets map[string]ServiceTarget
}

func newServiceKind(in Input) (bindingKind, error) {
	return &serviceKind{in: in, targets: map[string]ServiceTarget{}}, nil
}

func (k *serviceKind) bind(field string, b v1alpha1.Binding) (string, error) {
	s := b.Service
	if s.Name == "" {
		return "", fmt.Errorf("%s.service.name: required", field)
	}
	if s.Name == k.in.Worker.Name {
		self := Quote(WorkerServiceName(s.Name))
		if s.Entrypoint != "" {
			return kv("service", tuple(kv("name", self), kv("entrypoint", Quote(s.Entrypoint)))), nil
		}
		return kv("service", self), nil
	}
	if s.Entrypoint != "" {
		return "", fmt.Errorf("%s.service.entrypoint: named entrypoint %q of another Worker is not supported yet (workerd cannot address a named entrypoint through an external service)", field, s.Entrypoint)
	}
	d, err := k.target(field+".service.name", s.Name)
	if err != nil {
		return "", err
	}
	return kv("service", d), nil
}

// target is the service designator of another Worker of the namespace (the external
// service contribute adds once per Worker); field names the reference in errors.
func (k *serviceKind) target(field, worker string) (string, error) {
	t, ok := k.in.Services[worker]
	if !ok || t.Address == "" {
		return "", fmt.Errorf("%s: Worker %q not found", field, worker)
	}
	k.targets[worker] = t
	return Quote(targetService(worker)), nil
}

// renderTails resolves spec.tails to service designators for the user Worker's
// `tails`: the tail Worker's rpc socket, as for a service binding (workerd delivers the
// tail events over Cap'n Proto).
func renderTails(w *v1alpha1.Worker, k *serviceKind) ([]string, error) {
	var out []string
	for i, t := range w.Spec.Tails {
		field := fmt.Sprintf("spec.tails[%d].service", i)
		if t.Service == w.Name {
			return nil, fmt.Errorf("%s: a Worker cannot be its own tail consumer (https://developers.cloudflare.com/workers/observability/logs/tail-workers/)", field)
		}
		d, err := k.target(field, t.Service)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func targetService(worker string) string { return "service:" + worker }

// contribute adds one external service per target Worker, by name.
func (k *serviceKind) contribute(x *extras) error {
	for _, n := range sortedKeys(k.targets) {
		x.services.item(named(targetService(n)), kv("external", external(k.in.Options, k.in.Worker.Namespace, k.targets[n].Address, rpcOptions())))
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
