package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
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
	// Version is a content hash (16 hex chars) of everything the pod runs: config,
	// module bytes (including External) and secret references (names, never values).
	Version string
}

// ServiceAddress returns "<worker>.<namespace>.svc.<domain>:<http port>", the in-cluster
// address of a Worker's Service http port (docs/pod-contract.md).
func ServiceAddress(w *v1alpha1.Worker, opts Options) string {
	return serviceHost(w.Name, w.Namespace, opts) + fmt.Sprintf(":%d", HTTPPort(w))
}

// RPCServiceName is the name of a Worker's rpc Service: "<name>-rpc".
func RPCServiceName(name string) string { return name + "-rpc" }

// RPCAddress returns "<worker>-rpc.<namespace>.svc.<domain>:9095", the rpc Service,
// where service bindings from other Workers connect (podcontract.RPCPort).
func RPCAddress(w *v1alpha1.Worker, opts Options) string {
	return serviceHost(RPCServiceName(w.Name), w.Namespace, opts) + fmt.Sprintf(":%d", podcontract.RPCPort)
}

func serviceHost(name, ns string, opts Options) string {
	domain := opts.ClusterDomain
	if domain == "" {
		domain = DefaultClusterDomain
	}
	if ns == "" {
		ns = "default"
	}
	return fmt.Sprintf("%s.%s.svc.%s", name, ns, domain)
}

// HTTPPort is spec.service.port, default podcontract.DefaultHTTPPort.
func HTTPPort(w *v1alpha1.Worker) int32 {
	if w.Spec.Service != nil && w.Spec.Service.Port != nil {
		return *w.Spec.Service.Port
	}
	return podcontract.DefaultHTTPPort
}

// MemoryMiB is spec.limits.memoryMiB, default DefaultMemoryMiB.
func MemoryMiB(w *v1alpha1.Worker) int32 {
	if w.Spec.Limits != nil && w.Spec.Limits.MemoryMiB != nil {
		return *w.Spec.Limits.MemoryMiB
	}
	return DefaultMemoryMiB
}

// Args returns the workerd container args per docs/pod-contract.md:
//
//	serve --experimental /etc/workerd/config.capnp --socket-addr=http=$(POD_IP):<port>
//	--socket-addr=rpc=$(POD_IP):9095 --socket-addr=health=$(POD_IP):9090
//	--socket-addr=trigger=$(POD_IP):9091 --external-addr=sidecar=$(POD_IP):9092
//
// Kubernetes expands $(POD_IP) from the container's env (downward API status.podIP).
func Args(w *v1alpha1.Worker) []string {
	return []string{
		"serve", "--experimental", podcontract.ConfigDir + "/" + podcontract.ConfigFile,
		fmt.Sprintf("--socket-addr=%s=$(POD_IP):%d", podcontract.HTTPSocket, HTTPPort(w)),
		fmt.Sprintf("--socket-addr=%s=$(POD_IP):%d", podcontract.RPCSocket, podcontract.RPCPort),
		fmt.Sprintf("--socket-addr=%s=$(POD_IP):%d", podcontract.HealthSocket, podcontract.HealthPort),
		fmt.Sprintf("--socket-addr=%s=$(POD_IP):%d", podcontract.TriggerSocket, podcontract.TriggerPort),
		fmt.Sprintf("--external-addr=%s=$(POD_IP):%d", podcontract.SidecarService, podcontract.SidecarPort),
	}
}

// WorkerServiceName is the name of the user's Worker in the rendered config: the
// Worker's name, or "worker:<name>" when the name is reserved ("internet", "sidecar").
// workerd's startup errors start with "service <this name>: ".
func WorkerServiceName(name string) string {
	switch name {
	case "internet", podcontract.SidecarService:
		return "worker:" + name
	}
	return name
}

// module is one module of the user's Worker, resolved.
type module struct {
	name  string
	typ   v1alpha1.ModuleType
	data  []byte
	field string // the spec field it came from, for errors
}

var moduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_@][A-Za-z0-9_.@/+-]*$`)

func checkModuleName(field, name string) error {
	if len(name) == 0 || len(name) > 253 {
		return fmt.Errorf("%s: module name %q must be 1 to 253 characters (api Module.name)", field, name)
	}
	if !moduleNameRE.MatchString(name) {
		return fmt.Errorf("%s: module name %q must match %s (api Module.name)", field, name, moduleNameRE)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return fmt.Errorf("%s: module name %q may not have empty, \".\" or \"..\" segments (api Module.name)", field, name)
		}
	}
	return nil
}

// TypeForKey is the module type of a ConfigMap key by extension (api ConfigMapSource):
// .js/.mjs ESModule, .cjs CommonJS, .json JSON, .wasm Wasm, other data keys Text,
// other binaryData keys Data.
func TypeForKey(key string, binaryData bool) v1alpha1.ModuleType {
	switch strings.ToLower(path.Ext(key)) {
	case ".js", ".mjs":
		return v1alpha1.ModuleESModule
	case ".cjs":
		return v1alpha1.ModuleCommonJS
	case ".json":
		return v1alpha1.ModuleJSON
	case ".wasm":
		return v1alpha1.ModuleWasm
	}
	if binaryData {
		return v1alpha1.ModuleData
	}
	return v1alpha1.ModuleText
}

func validType(t v1alpha1.ModuleType) bool {
	switch t {
	case v1alpha1.ModuleESModule, v1alpha1.ModuleCommonJS, v1alpha1.ModuleText,
		v1alpha1.ModuleData, v1alpha1.ModuleWasm, v1alpha1.ModuleJSON:
		return true
	}
	return false
}

func isTextType(t v1alpha1.ModuleType) bool {
	return t != v1alpha1.ModuleData && t != v1alpha1.ModuleWasm
}

func checkModuleData(m module) error {
	if isTextType(m.typ) && !utf8.Valid(m.data) {
		return fmt.Errorf("%s: %s module %q is not valid UTF-8", m.field, m.typ, m.name)
	}
	if m.typ == v1alpha1.ModuleJSON && !json.Valid(m.data) {
		var v any
		err := json.Unmarshal(m.data, &v)
		return fmt.Errorf("%s: JSON module %q: invalid JSON: %v", m.field, m.name, err)
	}
	if m.typ == v1alpha1.ModuleWasm && (len(m.data) < 8 || !bytes.Equal(m.data[:4], []byte("\x00asm"))) {
		return fmt.Errorf("%s: Wasm module %q does not start with the WebAssembly magic \\0asm", m.field, m.name)
	}
	return nil
}

// Render renders in.Worker. Errors name the field, e.g.
// "spec.bindings[2].json: invalid JSON: ...".
func Render(in Input) (*Output, error) {
	w := in.Worker
	if w == nil {
		return nil, fmt.Errorf("workerdconfig: Input.Worker is nil")
	}
	if w.Name == "" {
		return nil, fmt.Errorf("metadata.name: required")
	}
	if w.Spec.CompatibilityDate == "" {
		return nil, fmt.Errorf("spec.compatibilityDate: required (workerd: Worker must specify compatibilityDate)")
	}
	if mem := MemoryMiB(w); mem < 16 || mem > 4096 {
		return nil, fmt.Errorf("spec.limits.memoryMiB: %d is outside 16 to 4096 (api WorkerLimits.memoryMiB)", mem)
	}
	out := &Output{}
	var modules []module
	var external []File
	src := w.Spec.Source
	nsrc := 0
	for _, set := range []bool{src.Inline != nil, src.ConfigMap != nil, src.Image != nil} {
		if set {
			nsrc++
		}
	}
	if nsrc != 1 {
		return nil, fmt.Errorf("spec.source: exactly one of inline, configMap or image must be set (got %d)", nsrc)
	}
	switch {
	case src.Inline != nil:
		if len(src.Inline.Modules) == 0 {
			return nil, fmt.Errorf("spec.source.inline.modules: at least one module is required (the first is the main module)")
		}
		seen := map[string]string{}
		for i, m := range src.Inline.Modules {
			field := fmt.Sprintf("spec.source.inline.modules[%d]", i)
			if err := checkModuleName(field+".name", m.Name); err != nil {
				return nil, err
			}
			if prev, dup := seen[m.Name]; dup {
				return nil, fmt.Errorf("%s.name: duplicate module name %q (also %s)", field, m.Name, prev)
			}
			seen[m.Name] = field
			if !validType(m.Type) {
				return nil, fmt.Errorf("%s.type: %q is not one of ESModule, CommonJS, Text, Data, Wasm, JSON", field, m.Type)
			}
			var data []byte
			switch {
			case m.Content != nil && m.ContentBase64 != nil:
				return nil, fmt.Errorf("%s: exactly one of content or contentBase64 must be set", field)
			case m.Content != nil:
				if !isTextType(m.Type) {
					return nil, fmt.Errorf("%s.contentBase64: %s modules need contentBase64", field, m.Type)
				}
				data = []byte(*m.Content)
			case m.ContentBase64 != nil:
				b, err := base64.StdEncoding.DecodeString(*m.ContentBase64)
				if err != nil {
					return nil, fmt.Errorf("%s.contentBase64: invalid base64: %v", field, err)
				}
				data = b
			default:
				return nil, fmt.Errorf("%s: exactly one of content or contentBase64 must be set", field)
			}
			mod := module{name: m.Name, typ: m.Type, data: data, field: field}
			if err := checkModuleData(mod); err != nil {
				return nil, err
			}
			modules = append(modules, mod)
		}
		// Main first (spec order), the rest by name.
		rest := modules[1:]
		sort.Slice(rest, func(i, j int) bool { return rest[i].name < rest[j].name })
	case src.ConfigMap != nil:
		cs := src.ConfigMap
		cm := in.ConfigMap
		if cm == nil {
			return nil, fmt.Errorf("spec.source.configMap.name: ConfigMap %q not given to the renderer", cs.Name)
		}
		if cm.Name != cs.Name {
			return nil, fmt.Errorf("spec.source.configMap.name: want ConfigMap %q, got %q", cs.Name, cm.Name)
		}
		overrides := map[string]v1alpha1.ModuleType{}
		for i, o := range cs.ModuleTypes {
			if !validType(o.Type) {
				return nil, fmt.Errorf("spec.source.configMap.moduleTypes[%d].type: %q is not one of ESModule, CommonJS, Text, Data, Wasm, JSON", i, o.Type)
			}
			_, inData := cm.Data[o.Key]
			_, inBinary := cm.BinaryData[o.Key]
			if !inData && !inBinary {
				return nil, fmt.Errorf("spec.source.configMap.moduleTypes[%d].key: ConfigMap %q has no key %q", i, cm.Name, o.Key)
			}
			overrides[o.Key] = o.Type
		}
		type entry struct {
			key    string
			data   []byte
			binary bool
		}
		var entries []entry
		for k, v := range cm.Data {
			entries = append(entries, entry{k, []byte(v), false})
		}
		for k, v := range cm.BinaryData {
			if _, dup := cm.Data[k]; dup {
				return nil, fmt.Errorf("configMap %s: key %q is in both data and binaryData", cm.Name, k)
			}
			entries = append(entries, entry{k, v, true})
		}
		if _, ok := cm.Data[cs.Main]; !ok {
			if _, ok := cm.BinaryData[cs.Main]; !ok {
				return nil, fmt.Errorf("spec.source.configMap.main: ConfigMap %q has no key %q", cm.Name, cs.Main)
			}
		}
		sort.Slice(entries, func(i, j int) bool {
			if (entries[i].key == cs.Main) != (entries[j].key == cs.Main) {
				return entries[i].key == cs.Main
			}
			return entries[i].key < entries[j].key
		})
		for _, e := range entries {
			field := fmt.Sprintf("configMap %s key %q", cm.Name, e.key)
			if err := checkModuleName(field, e.key); err != nil {
				return nil, err
			}
			t, ok := overrides[e.key]
			if !ok {
				t = TypeForKey(e.key, e.binary)
			}
			mod := module{name: e.key, typ: t, data: e.data, field: field}
			if err := checkModuleData(mod); err != nil {
				return nil, err
			}
			modules = append(modules, mod)
			external = append(external, File{Key: e.key, Path: podcontract.ModulesSubdir + "/" + e.key, Data: e.data, Binary: e.binary})
		}
		if t := modules[0].typ; t != v1alpha1.ModuleESModule && t != v1alpha1.ModuleCommonJS {
			return nil, fmt.Errorf("spec.source.configMap.main: main module %q is %s; it must be ESModule or CommonJS", cs.Main, t)
		}
	case src.Image != nil:
		// An image bundle must be a single ES module (bundle it, e.g. with esbuild or
		// wrangler deploy --dry-run): the renderer cannot list the image's files.
		if err := checkModuleName("spec.source.image.main", src.Image.Main); err != nil {
			return nil, err
		}
		modules = append(modules, module{name: src.Image.Main, typ: v1alpha1.ModuleESModule, field: "spec.source.image.main"})
	}
	if src.Inline != nil {
		if t := modules[0].typ; t != v1alpha1.ModuleESModule && t != v1alpha1.ModuleCommonJS {
			return nil, fmt.Errorf("spec.source.inline.modules[0].type: the main module is %s; it must be ESModule or CommonJS", t)
		}
	}

	// Bindings, sorted by name.
	type bindingLine struct{ name, text string }
	var bindings []bindingLine
	targets := map[string]ServiceTarget{}
	seenB := map[string]int{}
	svcName := WorkerServiceName(w.Name)
	dor, err := newDORender(in)
	if err != nil {
		return nil, err
	}
	wfr, err := newWFRender(in)
	if err != nil {
		return nil, err
	}
	for i, b := range w.Spec.Bindings {
		field := fmt.Sprintf("spec.bindings[%d]", i)
		if b.Name == "" {
			return nil, fmt.Errorf("%s.name: required", field)
		}
		if j, dup := seenB[b.Name]; dup {
			return nil, fmt.Errorf("%s.name: duplicate binding %q (also spec.bindings[%d])", field, b.Name, j)
		}
		seenB[b.Name] = i
		n := 0
		for _, set := range []bool{b.Text != nil, b.JSON != nil, b.SecretKeyRef != nil, b.Service != nil, b.DurableObjectNamespace != nil, b.Workflow != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("%s: exactly one of text, json, secretKeyRef, service, durableObjectNamespace or workflow must be set (got %d)", field, n)
		}
		var line string
		switch {
		case b.Text != nil:
			line = "text = " + Quote(*b.Text)
		case b.JSON != nil:
			var buf bytes.Buffer
			if err := json.Compact(&buf, []byte(*b.JSON)); err != nil {
				return nil, fmt.Errorf("%s.json: invalid JSON: %v", field, err)
			}
			line = "json = " + Quote(buf.String())
		case b.SecretKeyRef != nil:
			ref := b.SecretKeyRef
			if ref.Name == "" {
				return nil, fmt.Errorf("%s.secretKeyRef.name: required", field)
			}
			if ref.Key == "" {
				return nil, fmt.Errorf("%s.secretKeyRef.key: required", field)
			}
			env := podcontract.SecretEnvPrefix + b.Name
			line = "fromEnvironment = " + Quote(env)
			out.Env = append(out.Env, corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref.DeepCopy()}})
		case b.Service != nil:
			s := b.Service
			if s.Name == "" {
				return nil, fmt.Errorf("%s.service.name: required", field)
			}
			if s.Name == w.Name {
				if s.Entrypoint != "" {
					line = fmt.Sprintf("service = (name = %s, entrypoint = %s)", Quote(svcName), Quote(s.Entrypoint))
				} else {
					line = "service = " + Quote(svcName)
				}
				break
			}
			if s.Entrypoint != "" {
				return nil, fmt.Errorf("%s.service.entrypoint: named entrypoint %q of another Worker is not supported yet (workerd cannot address a named entrypoint through an external service)", field, s.Entrypoint)
			}
			t, ok := in.Services[s.Name]
			if !ok || t.Address == "" {
				return nil, fmt.Errorf("%s.service.name: Worker %q not found", field, s.Name)
			}
			targets[s.Name] = t
			line = "service = " + Quote("service:"+s.Name)
		case b.DurableObjectNamespace != nil:
			l, err := dor.binding(field, *b.DurableObjectNamespace)
			if err != nil {
				return nil, err
			}
			line = l
		case b.Workflow != nil:
			l, err := wfr.binding(field, *b.Workflow)
			if err != nil {
				return nil, err
			}
			line = l
		}
		bindings = append(bindings, bindingLine{b.Name, line})
	}
	if name, line, ok := dor.channelsBinding(); ok {
		if j, dup := seenB[name]; dup {
			return nil, fmt.Errorf("spec.bindings[%d].name: %q is the channels binding of DurableObjectNamespace %s (its spec.channels.binding); rename one of them", j, name, in.Host)
		}
		bindings = append(bindings, bindingLine{name, line})
	}
	sort.Slice(bindings, func(i, j int) bool { return bindings[i].name < bindings[j].name })
	out.Env = append(out.Env, dor.env()...)
	sort.Slice(out.Env, func(i, j int) bool { return out.Env[i].Name < out.Env[j].Name })

	flags := append([]string(nil), w.Spec.CompatibilityFlags...)
	sort.Strings(flags)
	for i, f := range flags {
		if i > 0 && flags[i-1] == f {
			return nil, fmt.Errorf("spec.compatibilityFlags: duplicate flag %q", f)
		}
	}

	// The config.
	var c strings.Builder
	ns := w.Namespace
	if ns == "" {
		ns = "default"
	}
	fmt.Fprintf(&c, "# Rendered by workerd-operator for Worker %s/%s. Do not edit: the operator\n", ns, w.Name)
	c.WriteString("# overwrites it. Socket and sidecar addresses come by flag (docs/pod-contract.md).\n")
	c.WriteString("using Workerd = import \"/workerd/workerd.capnp\";\n\n")
	c.WriteString("const config :Workerd.Config = (\n  services = [\n")
	// The user's Worker.
	fmt.Fprintf(&c, "    (name = %s, worker = (\n", Quote(svcName))
	c.WriteString("      modules = [\n")
	for _, m := range modules {
		fmt.Fprintf(&c, "        (name = %s, %s = embed %s),\n", Quote(m.name), capnpModuleField(m.typ), Quote(podcontract.ModulesSubdir+"/"+m.name))
	}
	c.WriteString("      ],\n")
	fmt.Fprintf(&c, "      compatibilityDate = %s,\n", Quote(w.Spec.CompatibilityDate))
	if len(flags) > 0 {
		c.WriteString("      compatibilityFlags = [")
		for i, f := range flags {
			if i > 0 {
				c.WriteString(", ")
			}
			c.WriteString(Quote(f))
		}
		c.WriteString("],\n")
	}
	if len(bindings) > 0 {
		c.WriteString("      bindings = [\n")
		for _, b := range bindings {
			fmt.Fprintf(&c, "        (name = %s, %s),\n", Quote(b.name), b.text)
		}
		c.WriteString("      ],\n")
	}
	c.WriteString(dor.workerFields())
	c.WriteString("    )),\n")
	// Other Workers, by name.
	names := make([]string, 0, len(targets))
	for n := range targets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&c, "    (name = %s, external = (address = %s, http = (capnpConnectHost = %s))),\n",
			Quote("service:"+n), Quote(targets[n].Address), Quote(podcontract.RPCConnectHost))
	}
	c.WriteString(dor.services())
	c.WriteString(wfr.services())
	// Sidecar and shims.
	fmt.Fprintf(&c, "    (name = %s, external = (http = ())),\n", Quote(podcontract.SidecarService))
	fmt.Fprintf(&c, "    (name = %s, worker = (\n", Quote(podcontract.HealthService))
	fmt.Fprintf(&c, "      modules = [(name = %s, esModule = embed %s)],\n", Quote(shim.HealthModule), Quote(podcontract.ShimSubdir+"/"+shim.HealthModule))
	fmt.Fprintf(&c, "      compatibilityDate = %s,\n", Quote(ShimCompatibilityDate))
	fmt.Fprintf(&c, "      bindings = [(name = \"SIDECAR\", service = %s)],\n", Quote(podcontract.SidecarService))
	c.WriteString("    )),\n")
	fmt.Fprintf(&c, "    (name = %s, worker = (\n", Quote(podcontract.TriggerService))
	fmt.Fprintf(&c, "      modules = [(name = %s, esModule = embed %s)],\n", Quote(shim.TriggerModule), Quote(podcontract.ShimSubdir+"/"+shim.TriggerModule))
	fmt.Fprintf(&c, "      compatibilityDate = %s,\n", Quote(ShimCompatibilityDate))
	c.WriteString("      compatibilityFlags = [\"service_binding_extra_handlers\"],\n")
	fmt.Fprintf(&c, "      bindings = [(name = \"TARGET\", service = %s)],\n", Quote(svcName))
	c.WriteString("    )),\n")
	c.WriteString("  ],\n")
	c.WriteString("  sockets = [\n")
	fmt.Fprintf(&c, "    (name = %s, http = (), service = %s),\n", Quote(podcontract.HTTPSocket), Quote(svcName))
	fmt.Fprintf(&c, "    (name = %s, http = (capnpConnectHost = %s), service = %s),\n", Quote(podcontract.RPCSocket), Quote(podcontract.RPCConnectHost), Quote(svcName))
	fmt.Fprintf(&c, "    (name = %s, http = (), service = %s),\n", Quote(podcontract.HealthSocket), Quote(podcontract.HealthService))
	fmt.Fprintf(&c, "    (name = %s, http = (), service = %s),\n", Quote(podcontract.TriggerSocket), Quote(podcontract.TriggerService))
	c.WriteString(dor.sockets())
	c.WriteString(wfr.sockets())
	c.WriteString("  ],\n")
	c.WriteString(wfr.joinExtensions(dor.extensions()))
	fmt.Fprintf(&c, "  v8Flags = [\"--max-old-space-size=%d\"],\n", MemoryMiB(w))
	c.WriteString("  logging = (structuredLogging = true),\n")
	c.WriteString(");\n")

	out.Files = append(out.Files, File{Key: podcontract.ConfigFile, Path: podcontract.ConfigFile, Data: []byte(c.String())})
	for _, n := range []string{shim.HealthModule, shim.TriggerModule} {
		b, err := shim.Source(n)
		if err != nil {
			return nil, err
		}
		out.Files = append(out.Files, newFile(podcontract.ShimSubdir+"/"+n, b, false))
	}
	doFiles, err := dor.files()
	if err != nil {
		return nil, err
	}
	out.Files = append(out.Files, doFiles...)
	wfFiles, err := wfr.files()
	if err != nil {
		return nil, err
	}
	out.Files = append(out.Files, wfFiles...)
	if src.Inline != nil {
		for _, m := range modules {
			out.Files = append(out.Files, newFile(podcontract.ModulesSubdir+"/"+m.name, m.data, !isTextType(m.typ)))
		}
	}
	sort.Slice(out.Files, func(i, j int) bool { return out.Files[i].Path < out.Files[j].Path })
	keys := map[string]string{}
	for _, f := range out.Files {
		if p, dup := keys[f.Key]; dup {
			return nil, fmt.Errorf("spec.source.inline.modules: files %q and %q map to the same ConfigMap key %q; rename one", p, f.Path, f.Key)
		}
		keys[f.Key] = f.Path
		if len(f.Key) > 253 {
			return nil, fmt.Errorf("spec.source.inline.modules: ConfigMap key %q of %q is longer than 253 characters (Kubernetes ConfigMap key limit)", f.Key, f.Path)
		}
	}
	sort.Slice(external, func(i, j int) bool { return external[i].Path < external[j].Path })
	out.External = external
	out.Version = version(out)
	return out, nil
}

// FileKey maps a path relative to podcontract.ConfigDir to a ConfigMap key ("/" → "__").
func FileKey(p string) string { return strings.ReplaceAll(p, "/", "__") }

func newFile(p string, data []byte, bin bool) File {
	return File{Key: FileKey(p), Path: p, Data: data, Binary: bin}
}

func capnpModuleField(t v1alpha1.ModuleType) string {
	switch t {
	case v1alpha1.ModuleCommonJS:
		return "commonJsModule"
	case v1alpha1.ModuleText:
		return "text"
	case v1alpha1.ModuleData:
		return "data"
	case v1alpha1.ModuleWasm:
		return "wasm"
	case v1alpha1.ModuleJSON:
		return "json"
	}
	return "esModule"
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
	for _, e := range o.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			r := e.ValueFrom.SecretKeyRef
			opt := r.Optional != nil && *r.Optional
			put("secret", e.Name, r.Name, r.Key, strconv.FormatBool(opt))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Quote returns s as a Cap'n Proto text literal: double-quoted, with \" \\ \n \r \t
// and \xHH for other control bytes; UTF-8 passes through.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
