// Package localrun runs rendered Workers outside a cluster: it decodes manifests,
// renders every Worker in them as the controller would, writes the files a pod would
// see and starts the pinned workerd on them on loopback, for `workerd-operator render`
// and tests. internal/render stays pure; everything that touches files, processes or
// YAML lives here.
package localrun

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Manifests are the objects of one or more multi-document YAML (or JSON) streams that
// matter to the renderer. Other kinds are kept in Others (raw, one per document).
type Manifests struct {
	Workers                 []*v1alpha1.Worker
	DurableObjectNamespaces []*v1alpha1.DurableObjectNamespace
	Workflows               []*v1alpha1.Workflow
	CronSchedules           []*v1alpha1.CronSchedule
	KVNamespaces            []*v1alpha1.KVNamespace
	D1Databases             []*v1alpha1.D1Database
	Queues                  []*v1alpha1.Queue
	R2Buckets               []*v1alpha1.R2Bucket
	ConfigMaps              []*corev1.ConfigMap
	Secrets                 []*corev1.Secret
	Others                  [][]byte
}

// kinds are the kinds DecodeManifests decodes (strictly) into Manifests, by
// apiVersion group ("" for the core group) and kind.
var kinds = map[[2]string]func(doc []byte, m *Manifests) error{
	{v1alpha1.GroupVersion.Group, "Worker"}:                 decodeAppend(func(m *Manifests) *[]*v1alpha1.Worker { return &m.Workers }),
	{v1alpha1.GroupVersion.Group, "DurableObjectNamespace"}: decodeAppend(func(m *Manifests) *[]*v1alpha1.DurableObjectNamespace { return &m.DurableObjectNamespaces }),
	{v1alpha1.GroupVersion.Group, "Workflow"}:               decodeAppend(func(m *Manifests) *[]*v1alpha1.Workflow { return &m.Workflows }),
	{v1alpha1.GroupVersion.Group, "CronSchedule"}:           decodeAppend(func(m *Manifests) *[]*v1alpha1.CronSchedule { return &m.CronSchedules }),
	{v1alpha1.GroupVersion.Group, "KVNamespace"}:            decodeAppend(func(m *Manifests) *[]*v1alpha1.KVNamespace { return &m.KVNamespaces }),
	{v1alpha1.GroupVersion.Group, "D1Database"}:             decodeAppend(func(m *Manifests) *[]*v1alpha1.D1Database { return &m.D1Databases }),
	{v1alpha1.GroupVersion.Group, "Queue"}:                  decodeAppend(func(m *Manifests) *[]*v1alpha1.Queue { return &m.Queues }),
	{"", "ConfigMap"}:                                       decodeAppend(func(m *Manifests) *[]*corev1.ConfigMap { return &m.ConfigMaps }),
	{"", "Secret"}:                                          decodeAppend(func(m *Manifests) *[]*corev1.Secret { return &m.Secrets }),
	{v1alpha1.GroupVersion.Group, "R2Bucket"}:               decodeAppend(func(m *Manifests) *[]*v1alpha1.R2Bucket { return &m.R2Buckets }),
}

// decodeAppend decodes a document strictly into a new T and appends it to field(m).
func decodeAppend[T any](field func(*Manifests) *[]*T) func([]byte, *Manifests) error {
	return func(doc []byte, m *Manifests) error {
		obj := new(T)
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return err
		}
		l := field(m)
		*l = append(*l, obj)
		return nil
	}
}

// DecodeManifests reads a multi-document YAML stream; source names it in errors
// (e.g. the file name). Documents without apiVersion/kind are an error; empty
// documents are skipped.
func DecodeManifests(r io.Reader, source string, into *Manifests) error {
	y := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for i := 0; ; i++ {
		doc, err := y.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i+1, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return fmt.Errorf("%s: document %d: %w", source, i+1, err)
		}
		if meta.Kind == "" || meta.APIVersion == "" {
			return fmt.Errorf("%s: document %d: apiVersion and kind are required", source, i+1)
		}
		group, _, _ := strings.Cut(meta.APIVersion, "/")
		if !strings.Contains(meta.APIVersion, "/") {
			group = ""
		}
		decode, ok := kinds[[2]string{group, meta.Kind}]
		if !ok {
			into.Others = append(into.Others, doc)
			continue
		}
		if err := decode(doc, into); err != nil {
			return fmt.Errorf("%s: document %d (%s): %w", source, i+1, meta.Kind, err)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

func namespaceOf(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// Rendered is one rendering by RenderManifests: what the pods of a Worker, of a
// DurableObjectNamespace's shards or of a Workflow's engine run.
type Rendered struct {
	// Worker is the Worker whose code the pods run.
	Worker *v1alpha1.Worker
	Output *render.Output
	// HostKind and HostName name the DurableObjectNamespace or Workflow whose pods
	// these are; both "" for the Worker's own pods.
	HostKind, HostName string
	// Args are the workerd container's args in the cluster.
	Args []string
}

// PodSet is the name of the Deployment or StatefulSet running the rendering: the
// Worker's name, "<namespace>-do" (render.ShardSetName) or "<workflow>-wf".
func (r Rendered) PodSet() string {
	switch r.HostKind {
	case v1alpha1.ReferenceDurableObjectNamespace:
		return render.ShardSetName(r.HostName)
	case v1alpha1.ReferenceWorkflow:
		return render.EngineSetName(r.HostName)
	}
	if k, ok := dataKindOf[r.HostKind]; ok {
		return render.DataSetName(k, r.HostName)
	}
	return r.Worker.Name
}

// Title names the rendering: "Worker ns/name", or "DurableObjectNamespace ns/rooms
// (shard pods of Worker chat)".
func (r Rendered) Title() string {
	id := namespaceOf(r.Worker.Namespace) + "/"
	if r.HostKind == "" {
		return "Worker " + id + r.Worker.Name
	}
	what := "shard"
	if r.HostKind == v1alpha1.ReferenceWorkflow {
		what = "engine"
	}
	if _, ok := dataKindOf[r.HostKind]; ok {
		return fmt.Sprintf("%s %s%s (host pod)", r.HostKind, id, r.HostName)
	}
	return fmt.Sprintf("%s %s%s (%s pods of Worker %s)", r.HostKind, id, r.HostName, what, r.Worker.Name)
}

// Addresses are the addresses renderings point at; a nil field means the in-cluster
// address (render.RPCAddress, render.TargetFor, render.WorkflowTargetFor).
type Addresses struct {
	// Worker is the address of a service binding's target Worker.
	Worker func(w *v1alpha1.Worker) string
	// Shard is the gateway address of shard i of a DurableObjectNamespace.
	Shard func(d *v1alpha1.DurableObjectNamespace, i int) string
	// Engine is the engine (sidecar) address of a Workflow.
	Engine func(wf *v1alpha1.Workflow) string
}

// RenderManifests renders m as the controller would: every Worker's pods, then the
// shard pods of every DurableObjectNamespace and the engine pods of every Workflow.
// A source.configMap Worker gets the ConfigMap of that name in its namespace from m;
// bindings to Workers, DurableObjectNamespaces and Workflows of m resolve to their
// in-cluster addresses. A reference to an object not in m is an error naming the
// field. A DurableObjectNamespace gets the uniqueKey the cluster gives it,
// "<namespace>-<name>" (render.UniqueKey), unless its status names one.
func RenderManifests(m *Manifests, opts render.Options) ([]Rendered, error) {
	return RenderManifestsWith(m, opts, Addresses{})
}

// RenderManifestsWith is RenderManifests with the addresses of a.
func RenderManifestsWith(m *Manifests, opts render.Options, a Addresses) ([]Rendered, error) {
	if err := checkCronTargets(m); err != nil {
		return nil, err
	}
	var out []Rendered
	for _, w := range sortedByName(m.Workers) {
		in, err := inputFor(m, w, opts, a)
		if err != nil {
			return nil, err
		}
		r, err := renderOne(in, "", "", render.Args(w))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	hosts, err := renderHosts(m, opts, a)
	if err != nil {
		return nil, err
	}
	data, err := renderDataHosts(m, opts)
	return append(append(out, hosts...), data...), err
}

// dataKindOf maps the data store kinds to theirs in render.
var dataKindOf = map[string]render.DataKind{
	v1alpha1.ReferenceKVNamespace: render.DataKV, v1alpha1.ReferenceD1Database: render.DataD1, v1alpha1.ReferenceQueue: render.DataQueue,
}

// dataStores lists m's data stores as (kind, namespace, name).
func dataStores(m *Manifests) [][3]string {
	var out [][3]string
	for _, o := range sortedByName(m.KVNamespaces) {
		out = append(out, [3]string{v1alpha1.ReferenceKVNamespace, namespaceOf(o.Namespace), o.Name})
	}
	for _, o := range sortedByName(m.D1Databases) {
		out = append(out, [3]string{v1alpha1.ReferenceD1Database, namespaceOf(o.Namespace), o.Name})
	}
	for _, o := range sortedByName(m.Queues) {
		out = append(out, [3]string{v1alpha1.ReferenceQueue, namespaceOf(o.Namespace), o.Name})
	}
	return out
}

// renderDataHosts renders the host pod of every KVNamespace, D1Database and Queue of
// m (a D1Database's migrations from its ConfigMap in m).
func renderDataHosts(m *Manifests, opts render.Options) ([]Rendered, error) {
	var out []Rendered
	for _, s := range dataStores(m) {
		h := render.DataHost{Kind: dataKindOf[s[0]], Namespace: s[1], Name: s[2]}
		if db := findByName(m.D1Databases, s[1], s[2]); h.Kind == render.DataD1 && db.Spec.Migrations != nil {
			cm := findByName(m.ConfigMaps, s[1], db.Spec.Migrations.ConfigMap.Name)
			if cm == nil {
				return nil, fmt.Errorf("D1Database %s/%s: spec.migrations.configMap: ConfigMap %q is not in the files", s[1], s[2], db.Spec.Migrations.ConfigMap.Name)
			}
			h.Migrations, h.MigrationsTable = render.MigrationsOf(cm.Data), db.Spec.Migrations.Table
		}
		in := render.Input{Worker: render.DataHostWorker(h), Options: opts}
		if q := findByName(m.Queues, s[1], s[2]); h.Kind == render.DataQueue && len(q.Spec.Consumers) > 0 {
			// The host runs the consumer's code (docs/queues.md).
			h.Consumer = render.QueueConsumerOf(q.Spec.Consumers[0])
			if d := findByName(m.Queues, s[1], h.Consumer.DeadLetterQueue); d != nil && len(d.Spec.Consumers) > 0 && d.Spec.Consumers[0].Worker == q.Spec.Consumers[0].Worker {
				h.DeadLetterConsumer = render.QueueConsumerOf(d.Spec.Consumers[0])
			}
			var err error
			if in, err = hostInput(m, s[1], s[0], s[2], q.Spec.Consumers[0].Worker, opts, Addresses{}); err != nil {
				return nil, err
			}
		}
		in.DataHost = &h
		r, err := renderOne(in, s[0], s[2], render.DataHostArgs(in.Worker, h.Kind))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// renderHosts renders the shard pods of every DurableObjectNamespace and the engine
// pods of every Workflow of m.
func renderHosts(m *Manifests, opts render.Options, a Addresses) ([]Rendered, error) {
	var out []Rendered
	for _, d := range sortedByName(m.DurableObjectNamespaces) {
		in, err := hostInput(m, d.Namespace, v1alpha1.ReferenceDurableObjectNamespace, d.Name, d.Spec.WorkerRef.Name, opts, a)
		if err != nil {
			return nil, err
		}
		in.Host = d.Name
		r, err := renderOne(in, v1alpha1.ReferenceDurableObjectNamespace, d.Name, render.ShardArgs(in.Worker))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for _, wf := range sortedByName(m.Workflows) {
		in, err := hostInput(m, wf.Namespace, v1alpha1.ReferenceWorkflow, wf.Name, wf.Spec.WorkerRef.Name, opts, a)
		if err != nil {
			return nil, err
		}
		in.WorkflowHosts = []render.WorkflowHost{{Name: wf.Name, ClassName: wf.Spec.ClassName}}
		r, err := renderOne(in, v1alpha1.ReferenceWorkflow, wf.Name, append(render.Args(in.Worker), render.WorkflowEngineArgs()...))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func renderOne(in render.Input, hostKind, hostName string, args []string) (Rendered, error) {
	o, err := render.Render(in)
	if err != nil {
		r := Rendered{Worker: in.Worker, HostKind: hostKind, HostName: hostName}
		return Rendered{}, fmt.Errorf("%s: %w", r.Title(), err)
	}
	return Rendered{Worker: in.Worker, Output: o, HostKind: hostKind, HostName: hostName, Args: append(append([]string(nil), args...), o.Args...)}, nil
}

// hostInput is the input of the pods of a DurableObjectNamespace or Workflow (kind,
// name) of namespace ns running the code of Worker worker, which must be in m.
func hostInput(m *Manifests, ns, kind, name, worker string, opts render.Options, a Addresses) (render.Input, error) {
	w := findByName(m.Workers, ns, worker)
	if w == nil {
		return render.Input{}, fmt.Errorf("%s %s/%s: spec.workerRef.name: Worker %q is not in the files", kind, namespaceOf(ns), name, worker)
	}
	return inputFor(m, w, opts, a)
}

// inputFor is the renderer input of w's pods: its ConfigMap and the addresses of the
// Workers, DurableObjectNamespaces and Workflows of its namespace in m.
func inputFor(m *Manifests, w *v1alpha1.Worker, opts render.Options, a Addresses) (render.Input, error) {
	ns := namespaceOf(w.Namespace)
	in := render.Input{Worker: w, Options: opts, Services: map[string]render.ServiceTarget{},
		DurableObjects: map[string]render.DurableObjectTarget{}, Workflows: map[string]render.WorkflowTarget{}}
	for _, o := range m.Workers {
		if namespaceOf(o.Namespace) == ns {
			in.Services[o.Name] = render.ServiceTarget{Address: address(a.Worker, o, func() string { return render.RPCAddress(o, opts) })}
		}
	}
	for _, d := range m.DurableObjectNamespaces {
		if namespaceOf(d.Namespace) != ns {
			continue
		}
		t, err := doTarget(d, opts, a)
		if err != nil {
			return render.Input{}, err
		}
		in.DurableObjects[d.Name] = t
	}
	for _, wf := range m.Workflows {
		if namespaceOf(wf.Namespace) == ns {
			in.Workflows[wf.Name] = render.WorkflowTarget{Address: address(a.Engine, wf, func() string { return render.WorkflowTargetFor(ns, wf.Name, opts).Address })}
		}
	}
	in.DataStores = map[render.DataRef]string{}
	for _, s := range dataStores(m) {
		if s[1] == ns {
			k := dataKindOf[s[0]]
			in.DataStores[render.DataRef{Kind: k, Name: s[2]}] = render.DataAddress(ns, k, s[2], opts)
		}
	}
	in.R2Buckets = map[string]render.R2BucketTarget{}
	for _, b := range m.R2Buckets {
		if namespaceOf(b.Namespace) == ns {
			s3 := b.Spec.S3
			in.R2Buckets[b.Name] = render.R2BucketTarget{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Region: s3.Region, SecretName: s3.CredentialsSecret.Name}
		}
	}
	if cs := w.Spec.Source.ConfigMap; cs != nil {
		in.ConfigMap = findByName(m.ConfigMaps, w.Namespace, cs.Name)
	}
	return in, nil
}

// doTarget is render.TargetFor(d) with the shard addresses of a.Shard when set.
func doTarget(d *v1alpha1.DurableObjectNamespace, opts render.Options, a Addresses) (render.DurableObjectTarget, error) {
	t, err := render.TargetFor(d, opts)
	if err != nil {
		return t, err
	}
	if a.Shard != nil {
		// A local run has no resharding: only the shards that run get an address.
		t.ShardAddresses = t.ShardAddresses[:t.Shards]
		for i := range t.ShardAddresses {
			t.ShardAddresses[i] = a.Shard(d, i)
		}
	}
	return t, nil
}

// checkCronTargets reports a CronSchedule whose target is not in m.
func checkCronTargets(m *Manifests) error {
	for _, c := range m.CronSchedules {
		t := c.Spec.Target
		switch {
		case t.WorkerRef != nil && findByName(m.Workers, c.Namespace, t.WorkerRef.Name) == nil:
			return fmt.Errorf("CronSchedule %s/%s: spec.target.workerRef.name: Worker %q is not in the files", namespaceOf(c.Namespace), c.Name, t.WorkerRef.Name)
		case t.WorkflowRef != nil && findByName(m.Workflows, c.Namespace, t.WorkflowRef.Name) == nil:
			return fmt.Errorf("CronSchedule %s/%s: spec.target.workflowRef.name: Workflow %q is not in the files", namespaceOf(c.Namespace), c.Name, t.WorkflowRef.Name)
		}
	}
	return nil
}

func address[T any](f func(T) string, obj T, def func() string) string {
	if f != nil {
		return f(obj)
	}
	return def()
}

// object is what sortedByName and findByName need of an object.
type object interface {
	GetName() string
	GetNamespace() string
}

// sortedByName returns objs sorted by namespace, then name.
func sortedByName[T object](objs []T) []T {
	out := append([]T(nil), objs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if namespaceOf(a.GetNamespace()) != namespaceOf(b.GetNamespace()) {
			return namespaceOf(a.GetNamespace()) < namespaceOf(b.GetNamespace())
		}
		return a.GetName() < b.GetName()
	})
	return out
}

// findByName returns the object of objs named name in namespace ns, or the zero T.
func findByName[T object](objs []T, ns, name string) T {
	var zero T
	for _, o := range objs {
		if o.GetName() == name && namespaceOf(o.GetNamespace()) == namespaceOf(ns) {
			return o
		}
	}
	return zero
}

// SecretEnv returns "WORKERD_SECRET_<NAME>=<value>" for every secretKeyRef env var of
// out whose Secret and key are in secrets (same namespace as w), for running the
// rendering locally; missing ones are listed in missing ("<secret>/<key>").
func SecretEnv(w *v1alpha1.Worker, out *render.Output, secrets []*corev1.Secret) (env []string, missing []string) {
	for _, e := range out.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		found := false
		for _, s := range secrets {
			if s.Name != ref.Name || namespaceOf(s.Namespace) != namespaceOf(w.Namespace) {
				continue
			}
			if v, ok := s.StringData[ref.Key]; ok {
				env, found = append(env, e.Name+"="+v), true
			} else if v, ok := s.Data[ref.Key]; ok {
				env, found = append(env, e.Name+"="+string(v)), true
			}
		}
		if !found {
			missing = append(missing, ref.Name+"/"+ref.Key)
		}
	}
	return env, missing
}

// Format writes out as text: a header naming the Worker and version, the secret
// references, then every file ("--- <path>" and its content; binary files as base64).
// With shims false the shim worker files are listed by path only.
func Format(wr io.Writer, w *v1alpha1.Worker, out *render.Output, shims bool) error {
	return FormatRendered(wr, Rendered{Worker: w, Output: out, Args: append(render.Args(w), out.Args...)}, shims)
}

// FormatRendered is Format for any rendering: the header names it (Rendered.Title)
// and its args.
func FormatRendered(wr io.Writer, r Rendered, shims bool) error {
	w, out := r.Worker, r.Output
	var b strings.Builder
	fmt.Fprintf(&b, "# %s version %s\n", r.Title(), out.Version)
	fmt.Fprintf(&b, "# args: %s\n", strings.Join(r.Args, " "))
	for _, e := range out.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fmt.Fprintf(&b, "# env %s from Secret %s key %s\n", e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
		}
	}
	files := append(append([]render.File(nil), out.Files...), out.External...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		origin := "key " + f.Key
		for _, x := range out.External {
			if x.Path == f.Path {
				origin = "from ConfigMap " + w.Spec.Source.ConfigMap.Name + " key " + f.Key
			}
		}
		if strings.HasPrefix(f.Path, podcontract.ShimSubdir+"/") && !shims {
			fmt.Fprintf(&b, "--- %s (%s, %d bytes, shim)\n", f.Path, origin, len(f.Data))
			continue
		}
		if f.Binary {
			fmt.Fprintf(&b, "--- %s (%s, binary, base64)\n%s\n", f.Path, origin, base64.StdEncoding.EncodeToString(f.Data))
			continue
		}
		fmt.Fprintf(&b, "--- %s (%s)\n%s", f.Path, origin, f.Data)
		if len(f.Data) > 0 && f.Data[len(f.Data)-1] != '\n' {
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(wr, b.String())
	return err
}

// SecretFiles lays out what the pod mounts from Secrets for running out locally: every
// key of each SecretVolume's Secret (from secrets, same namespace as w) as a file under
// dir. It returns the external service addresses of out.Args (--external-addr, with
// the $(VAR)s of env expanded; "127.0.0.1:1" when a value is missing, which starts
// workerd but connects nowhere) and the Secrets not found.
func SecretFiles(w *v1alpha1.Worker, out *render.Output, secrets []*corev1.Secret, dir string, env []string) (map[string]string, []string, error) {
	var missing []string
	for _, v := range out.SecretVolumes {
		s := findByName(secrets, namespaceOf(w.Namespace), v.Secret)
		if s == nil {
			missing = append(missing, v.Secret)
		}
		if err := os.MkdirAll(filepath.Join(dir, v.Dir), 0o755); err != nil {
			return nil, nil, err
		}
		data := map[string][]byte{}
		for _, k := range v.Keys {
			data[k] = nil // an empty file: the config loads, the binding gets ""
		}
		if s != nil {
			for k, b := range s.Data {
				data[k] = b
			}
			for k, str := range s.StringData {
				data[k] = []byte(str)
			}
		}
		for k, b := range data {
			if err := os.WriteFile(filepath.Join(dir, v.Dir, k), b, 0o600); err != nil {
				return nil, nil, err
			}
		}
	}
	return externalsOf(out.Args, env), missing, nil
}

// externalsOf are the --external-addr flags of args, with env's $(VAR)s expanded.
func externalsOf(args, env []string) map[string]string {
	vars := map[string]string{}
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok {
			vars[k] = val
		}
	}
	externals := map[string]string{}
	for _, a := range args {
		name, addr, ok := strings.Cut(strings.TrimPrefix(a, "--external-addr="), "=")
		if !ok || !strings.HasPrefix(a, "--external-addr=") {
			continue
		}
		unset := false
		addr = os.Expand(strings.NewReplacer("$(", "${", ")", "}").Replace(addr), func(k string) string {
			val, ok := vars[k]
			unset = unset || !ok
			return val
		})
		if unset {
			addr = "127.0.0.1:1"
		}
		externals[name] = addr
	}
	return externals
}
