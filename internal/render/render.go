package render

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/shim"
)

// Renderer settings.
const (
	// DefaultMemoryMiB is V8's --max-old-space-size when spec.limits.memoryMiB is unset
	// (Cloudflare's 128 MB per isolate, https://developers.cloudflare.com/workers/platform/limits/#memory).
	DefaultMemoryMiB = 128
	// DefaultClusterDomain is Options.ClusterDomain's default.
	DefaultClusterDomain = "cluster.local"
	// ShimCompatibilityDate is the compatibility date of the shim workers.
	ShimCompatibilityDate = "2025-01-01"
)

// Options are cluster-wide settings of the renderer.
type Options struct {
	// ClusterDomain is the cluster DNS domain (manager flag --cluster-domain); default
	// "cluster.local". Used by ServiceAddress.
	ClusterDomain string
	// InternalTLS makes the cross-pod sockets and external services mutual TLS with the
	// pod's internal TLS files (tls.go); the manager sets it, local runs do not.
	InternalTLS bool
	// Outbound is the operator's outbound default: Allow applies to Workers whose
	// spec.outbound.allow is empty, Deny to every Worker (manager flags
	// --outbound-default-allow and --outbound-deny; docs/outbound.md). Both empty and no
	// spec.outbound: no network service is rendered and workerd allows public addresses.
	Outbound outbound.Rules
	// NoInvocationMetrics leaves out the streaming tail worker (shim tail.js) that feeds
	// the sidecar's invocation metrics, logs and traces (manager flag
	// --invocation-metrics=false): it costs a fixed time per invocation
	// (docs/observability.md, docs/benchmarks.md).
	NoInvocationMetrics bool
	// ManagerAPI is the manager's internal API (podcontract.ContainersAPIURL), from
	// which dispatch Workers' sidecars read Shared user Workers' code; empty: every user
	// Worker is reached in its own pods.
	ManagerAPI string
}

// ServiceTarget is where a service binding reaches another Worker.
type ServiceTarget struct {
	// Address is "host:port" of the target Worker's http socket, e.g.
	// "greeter.default.svc.cluster.local:8080" (ServiceAddress) or "127.0.0.1:18080".
	Address string
}

// Input is everything Render needs.
type Input struct {
	// Worker to render; required.
	Worker *v1alpha1.Worker
	// ConfigMap is the ConfigMap named by spec.source.configMap, when that source is used.
	ConfigMap *corev1.ConfigMap
	// Services maps a target Worker name to its address, for every `service` binding
	// to another Worker.
	Services map[string]ServiceTarget
	// Options are cluster-wide settings.
	Options Options
	// DurableObjects maps a DurableObjectNamespace name to its target (TargetFor), for
	// every durableObjectNamespace binding and for Host (durableobjects.go).
	DurableObjects map[string]DurableObjectTarget
	// Host, when set, names the DurableObjectNamespace (a key of DurableObjects) whose
	// shard pods are rendered: Worker is its workerRef and hosts the class, with the
	// gateway socket (ShardArgs).
	Host string
	// Workflows maps a Workflow name to its engine's address, for every workflow binding
	// whose engine runs elsewhere (workflows.go).
	Workflows map[string]WorkflowTarget
	// WorkflowHosts are the Workflows whose engine runs in the pods being rendered
	// (runner worker + `workflows` socket, WorkflowEngineArgs; workflows.go).
	WorkflowHosts []WorkflowHost
	// R2Buckets maps an R2Bucket name to its store, for every r2Bucket binding (r2.go).
	R2Buckets map[string]R2BucketTarget
	// DataStores maps a KVNamespace, D1Database or Queue to its gateway address
	// (DataAddress), for every kvNamespace, d1Database and queue binding (datastores.go).
	DataStores map[DataRef]string
	// DataHost, when set, is the store whose host pod is rendered; Worker is then
	// DataHostWorker(*DataHost).
	DataHost *DataHost
	// Split, when set, is the gradual deployment the pods' ingress keeps (split.go).
	Split *Split
}

// SecretVolume is a Secret mounted, every key a file, at ConfigDir/Dir.
type SecretVolume struct {
	// Name of the pod volume (a DNS label).
	Name string
	// Secret is the Secret's name in the Worker's namespace.
	Secret string
	// Dir is relative to ConfigDir, e.g. "hyperdrive/DB".
	Dir string
	// Keys are the Secret's keys the config embeds (it fails to load without them).
	Keys []string
}

// File is one rendered file.
type File struct {
	// Key is a valid ConfigMap key for the file (Path with "/" replaced by "__").
	Key string
	// Path relative to podcontract.ConfigDir, e.g. "config.capnp", "modules/lib/util.mjs".
	Path string
	// Data are the bytes.
	Data []byte
	// Binary is true when Data belongs in a ConfigMap's binaryData (Wasm, Data modules).
	Binary bool
}

// Output is what a Worker's pods run.
type Output struct {
	// Files: config.capnp, the shim workers and the inline modules, sorted by Path. For
	// source.configMap only config.capnp and the shims: the user's ConfigMap is mounted
	// as is at /etc/workerd/modules. For source.image the bundle comes from the image.
	Files []File
	// External lists the files the pod gets from elsewhere that Render knows the
	// bytes of (the user's ConfigMap keys, at modules/<key>), sorted by Path; not part
	// of the rendered ConfigMap, listed so tools can lay out the full tree.
	External []File
	// Env are the workerd container's env vars: WORKERD_SECRET_<NAME> valueFrom
	// secretKeyRef, sorted by name.
	Env []corev1.EnvVar
	// Args are more workerd args, after those of Args/ShardArgs (a hyperdrive binding's
	// --external-addr, expanded by Kubernetes from Env).
	Args []string
	// SecretVolumes are Secrets the pod mounts under ConfigDir for the config to embed
	// (hyperdrive bindings), sorted by Dir.
	SecretVolumes []SecretVolume
	// SidecarEnv are the sidecar container's env vars: the R2 gateway's buckets
	// (podcontract.R2ConfigEnv) and the AI gateway's bindings (podcontract.AIConfigEnv),
	// and their credentials from Secrets, sorted by name.
	SidecarEnv []corev1.EnvVar
	// Version is a content hash (16 hex chars) of everything the pod runs: config,
	// module bytes (including External) and secret references (names, never values).
	Version string
}

// Render renders in.Worker. Errors name the field, e.g.
// "spec.bindings[2].json: invalid JSON: ...".
func Render(in Input) (*Output, error) {
	if err := checkWorker(in.Worker); err != nil {
		return nil, err
	}
	src, err := resolveSource(in)
	if err != nil {
		return nil, err
	}
	x, err := renderBindings(in)
	if err != nil {
		return nil, err
	}
	if err := renderOutbound(in, x); err != nil {
		return nil, err
	}
	if err := addSplit(in.Split, x); err != nil {
		return nil, err
	}
	flags, err := sortedFlags(in.Worker.Spec.CompatibilityFlags)
	if err != nil {
		return nil, err
	}
	config := writeConfig(in.Worker, src.modules, flags, x)
	files, err := renderedFiles(config, src, x)
	if err != nil {
		return nil, err
	}
	external := append([]File(nil), src.external...)
	sort.Slice(external, func(i, j int) bool { return external[i].Path < external[j].Path })
	out := &Output{Files: files, External: external, Env: x.env, Args: x.args, SecretVolumes: x.secretVolumes, SidecarEnv: x.sidecarEnv}
	out.Version = version(out)
	return out, nil
}

// checkWorker checks what Render needs of the Worker beyond its source and bindings.
func checkWorker(w *v1alpha1.Worker) error {
	switch {
	case w == nil:
		return fmt.Errorf("render: Input.Worker is nil")
	case w.Name == "":
		return fmt.Errorf("metadata.name: required")
	case w.Spec.CompatibilityDate == "":
		return fmt.Errorf("spec.compatibilityDate: required (workerd: Worker must specify compatibilityDate)")
	}
	if mem := MemoryMiB(w); mem < 16 || mem > 4096 {
		return fmt.Errorf("spec.limits.memoryMiB: %d is outside 16 to 4096 (api WorkerLimits.memoryMiB)", mem)
	}
	return nil
}

// sortedFlags are the compatibility flags, sorted, without duplicates.
func sortedFlags(in []string) ([]string, error) {
	flags := append([]string(nil), in...)
	sort.Strings(flags)
	for i, f := range flags {
		if i > 0 && flags[i-1] == f {
			return nil, fmt.Errorf("spec.compatibilityFlags: duplicate flag %q", f)
		}
	}
	return flags, nil
}

// renderedFiles are config.capnp, the shims and the inline modules, sorted by path,
// each with a ConfigMap key of its own.
func renderedFiles(config []byte, src *source, x *extras) ([]File, error) {
	files := []File{{Key: podcontract.ConfigFile, Path: podcontract.ConfigFile, Data: config}}
	for _, n := range []string{shim.HealthModule, shim.TriggerModule, shim.TailModule, shim.IngressModule} {
		b, err := shim.Source(n)
		if err != nil {
			return nil, err
		}
		files = append(files, newFile(podcontract.ShimSubdir+"/"+n, b, false))
	}
	files = append(files, x.files...)
	if src.inline {
		for _, m := range src.modules {
			files = append(files, newFile(podcontract.ModulesSubdir+"/"+m.name, m.data, !isTextType(m.typ)))
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	keys := map[string]string{}
	for _, f := range files {
		if p, dup := keys[f.Key]; dup {
			return nil, fmt.Errorf("spec.source.inline.modules: files %q and %q map to the same ConfigMap key %q; rename one", p, f.Path, f.Key)
		}
		keys[f.Key] = f.Path
		if len(f.Key) > 253 {
			return nil, fmt.Errorf("spec.source.inline.modules: ConfigMap key %q of %q is longer than 253 characters (Kubernetes ConfigMap key limit)", f.Key, f.Path)
		}
	}
	return files, nil
}

// FileKey maps a path relative to podcontract.ConfigDir to a ConfigMap key ("/" → "__").
func FileKey(p string) string { return strings.ReplaceAll(p, "/", "__") }

func newFile(p string, data []byte, bin bool) File {
	return File{Key: FileKey(p), Path: p, Data: data, Binary: bin}
}

// ContentVersion is the content hash Render puts in Output.Version (16 hex chars), for
// callers that add files to an Output (e.g. a sidecar config) and need its version to
// cover them.
func ContentVersion(o *Output) string { return version(o) }

func version(o *Output) string {
	h := sha256.New()
	put := func(parts ...string) {
		for _, p := range parts {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(p)))
			h.Write(n[:])
			h.Write([]byte(p))
		}
	}
	for _, f := range o.Files {
		put("file", f.Path, string(f.Data))
	}
	for _, f := range o.External {
		put("external", f.Path, string(f.Data))
	}
	for _, a := range o.Args {
		put("arg", a)
	}
	for _, v := range o.SecretVolumes {
		put("secretVolume", v.Name, v.Secret, v.Dir)
	}
	for _, e := range o.SidecarEnv {
		put("sidecarEnv", e.Name, e.Value)
	}
	for _, e := range append(o.Env, o.SidecarEnv...) {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			r := e.ValueFrom.SecretKeyRef
			opt := r.Optional != nil && *r.Optional
			put("secret", e.Name, r.Name, r.Key, strconv.FormatBool(opt))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
