package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/shim"
)

// Durable Object rendering (DESIGN.md §5, issue 7). A durableObjectNamespace binding
// becomes a `wrapped` binding over the extension module RouterModule (shim router.js)
// whose inner bindings are a real namespace binding with the namespace's uniqueKey (NS),
// the routing config (CONFIG) and one service binding per shard (SHARD_<i>) to that
// shard's gateway socket. A shard pod (Input.Host) additionally hosts the class with
// localDisk storage and serves the gateway socket (shim gateway.js).
const (
	// GatewayService is the name of the gateway worker in a shard pod's config.
	GatewayService = "workerd-operator:gateway"
	// DOStorageService is the disk service holding the hosted objects (workerd
	// localDisk); its path comes by flag: --directory-path=do-storage=<DOStorageDir>.
	DOStorageService = "do-storage"
	// DOStorageDir is where a shard pod mounts its PVC (docs/pod-contract.md). workerd
	// lays it out as <dir>/<uniqueKey>/<object id>.sqlite plus metadata.sqlite (alarms).
	DOStorageDir = "/var/lib/workerd/do"
	// PodNameEnv is the env var (downward API metadata.name) giving a shard pod its
	// ordinal, the shard it owns: "<statefulset>-<ordinal>".
	PodNameEnv = "POD_NAME"
	// Extension modules of the router.
	RouterModule       = "workerd-operator:router"
	RouterCommonModule = "workerd-operator:router-common"
	FailureModule      = "workerd-operator:failure"
	// Shim files.
	routerFile       = "router.js"
	routerCommonFile = "router-common.js"
	failureFile      = "failure.js"
	gatewayFile      = "gateway.js"
)

// DurableObjectTarget is what a router and a shard pod need to know about one
// DurableObjectNamespace (TargetFor builds it from the object).
type DurableObjectTarget struct {
	// Namespace and Name of the DurableObjectNamespace object.
	Namespace, Name string
	// Worker is spec.workerRef.name: the Worker whose code defines the class.
	Worker string
	// ClassName is spec.className.
	ClassName string
	// UniqueKey is the workerd uniqueKey (UniqueKey): ids and the storage directory
	// derive from it; the same in every pod.
	UniqueKey string
	// Shards is spec.shards (1..MaxShards).
	Shards int32
	// SQL is spec.sql (workerd enableSql); PreventEviction is spec.preventEviction.
	SQL, PreventEviction bool
	// ShardAddresses are "host:port" of each shard's gateway socket, len Shards
	// (ShardAddresses; tests pass loopback addresses).
	ShardAddresses []string
	// ShardNames are the shard pods' names (for error messages), len Shards.
	ShardNames []string
	// ChannelsBinding is spec.channels.binding (default DefaultChannelsBinding) when
	// spec.channels.enabled, else "": the shard pods give the hosted class's Worker a
	// `wrapped` binding of that name to the channels client (docs/channels.md).
	ChannelsBinding string
}

// DefaultChannelsBinding is the env name of the channels client when
// spec.channels.binding is unset (api ChannelsSpec.binding).
const DefaultChannelsBinding = "CHANNELS"

// ChannelsModule is the internal extension module of the channels client (shim channels.js).
const ChannelsModule = "workerd-operator:channels"

const channelsFile = "channels.js"

// ShardSetName is the name of the StatefulSet and of the headless Service of a
// DurableObjectNamespace: "<name>-do". Shard i is pod "<name>-do-<i>".
func ShardSetName(name string) string { return name + "-do" }

// UniqueKey is status.uniqueKey when set, else "<namespace>-<name>-<first 8 chars of
// metadata.uid>": fixed for the life of the object, the same in every pod.
func UniqueKey(d *v1alpha1.DurableObjectNamespace) string {
	if d.Status.UniqueKey != "" {
		return d.Status.UniqueKey
	}
	uid := string(d.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	ns := d.Namespace
	if ns == "" {
		ns = "default"
	}
	return fmt.Sprintf("%s-%s-%s", ns, d.Name, uid)
}

// Shards is spec.shards, default 1.
func Shards(d *v1alpha1.DurableObjectNamespace) int32 {
	if d.Spec.Shards != nil {
		return *d.Spec.Shards
	}
	return 1
}

// TargetFor builds the DurableObjectTarget of d with in-cluster gateway addresses
// "<name>-do-<i>.<name>-do.<namespace>.svc.<domain>:9093" (docs/pod-contract.md).
// Errors name the field: spec.shards outside 1..64, or no uid and no status.uniqueKey.
func TargetFor(d *v1alpha1.DurableObjectNamespace, opts Options) (DurableObjectTarget, error) {
	n := Shards(d)
	if n < 1 || n > MaxShards {
		return DurableObjectTarget{}, fmt.Errorf("DurableObjectNamespace %s: spec.shards: %d is outside 1 to %d (api DurableObjectNamespace.spec.shards)", d.Name, n, MaxShards)
	}
	if d.Status.UniqueKey == "" && d.UID == "" {
		return DurableObjectTarget{}, fmt.Errorf("DurableObjectNamespace %s: status.uniqueKey: not set and metadata.uid is empty (the uniqueKey derives from the uid)", d.Name)
	}
	domain := opts.ClusterDomain
	if domain == "" {
		domain = DefaultClusterDomain
	}
	ns := d.Namespace
	if ns == "" {
		ns = "default"
	}
	t := DurableObjectTarget{
		Namespace: ns, Name: d.Name, Worker: d.Spec.WorkerRef.Name, ClassName: d.Spec.ClassName,
		UniqueKey: UniqueKey(d), Shards: n, SQL: d.Spec.SQL, PreventEviction: d.Spec.PreventEviction,
	}
	if c := d.Spec.Channels; c != nil && c.Enabled {
		t.ChannelsBinding = c.Binding
		if t.ChannelsBinding == "" {
			t.ChannelsBinding = DefaultChannelsBinding
		}
	}
	set := ShardSetName(d.Name)
	for i := int32(0); i < n; i++ {
		pod := fmt.Sprintf("%s-%d", set, i)
		t.ShardNames = append(t.ShardNames, pod)
		t.ShardAddresses = append(t.ShardAddresses, fmt.Sprintf("%s.%s.%s.svc.%s:%d", pod, set, ns, domain, podcontract.GatewayPort))
	}
	return t, nil
}

// ShardArgs are Args(w) plus the gateway socket and the storage directory of a shard
// pod: --socket-addr=gateway=$(POD_IP):9093 --directory-path=do-storage=/var/lib/workerd/do.
func ShardArgs(w *v1alpha1.Worker) []string {
	return append(Args(w),
		fmt.Sprintf("--socket-addr=%s=$(POD_IP):%d", podcontract.GatewaySocket, podcontract.GatewayPort),
		fmt.Sprintf("--directory-path=%s=%s", DOStorageService, DOStorageDir))
}

// doRender collects what the Durable Object bindings and hosting add to a config.
type doRender struct {
	in      Input
	svcName string
	host    *DurableObjectTarget
	bound   map[string]DurableObjectTarget // by DurableObjectNamespace name
}

func newDORender(in Input) (*doRender, error) {
	d := &doRender{in: in, svcName: WorkerServiceName(in.Worker.Name), bound: map[string]DurableObjectTarget{}}
	if in.Host != "" {
		t, ok := in.DurableObjects[in.Host]
		if !ok {
			return nil, fmt.Errorf("Input.Host: DurableObjectNamespace %q not given to the renderer (Input.DurableObjects)", in.Host)
		}
		if t.Worker != in.Worker.Name {
			return nil, fmt.Errorf("DurableObjectNamespace %s: spec.workerRef.name is %q, not the rendered Worker %q", in.Host, t.Worker, in.Worker.Name)
		}
		if err := checkTarget(in.Host, t); err != nil {
			return nil, err
		}
		d.host = &t
	}
	return d, nil
}

func checkTarget(name string, t DurableObjectTarget) error {
	switch {
	case t.Shards < 1 || t.Shards > MaxShards:
		return fmt.Errorf("DurableObjectNamespace %s: spec.shards: %d is outside 1 to %d (api DurableObjectNamespace.spec.shards)", name, t.Shards, MaxShards)
	case len(t.ShardAddresses) != int(t.Shards):
		return fmt.Errorf("DurableObjectNamespace %s: %d shard addresses for %d shards", name, len(t.ShardAddresses), t.Shards)
	case t.UniqueKey == "":
		return fmt.Errorf("DurableObjectNamespace %s: status.uniqueKey: empty", name)
	case t.ClassName == "":
		return fmt.Errorf("DurableObjectNamespace %s: spec.className: empty", name)
	}
	return nil
}

func (d *doRender) hosts(name string) bool { return d.host != nil && d.in.Host == name }

// channels reports whether the pods host a namespace with durable channels enabled.
func (d *doRender) channels() bool { return d.host != nil && d.host.ChannelsBinding != "" }

// channelsBinding is the hosted class's Worker binding to the channels client: a
// `wrapped` binding holding the sidecar service and the namespace name, so user code
// never holds the sidecar binding itself (docs/channels.md). ok is false when the
// pods host no namespace with channels.
func (d *doRender) channelsBinding() (name, line string, ok bool) {
	if !d.channels() {
		return "", "", false
	}
	cfg, _ := json.Marshal(map[string]string{"namespace": d.host.Name})
	return d.host.ChannelsBinding, fmt.Sprintf("wrapped = (moduleName = %s, innerBindings = [(name = \"sidecar\", service = %s), (name = \"config\", json = %s)])",
		Quote(ChannelsModule), Quote(podcontract.SidecarService), Quote(string(cfg))), true
}

func idsService(name string) string { return "workerd-operator:do-ids:" + name }

func shardService(name string, i int) string {
	return fmt.Sprintf("workerd-operator:do-shard:%s:%d", name, i)
}

// nsDesignator is the real namespace binding behind the router of name.
func (d *doRender) nsDesignator(name string, t DurableObjectTarget) string {
	svc := idsService(name)
	if d.hosts(name) {
		svc = d.svcName
	}
	return fmt.Sprintf("durableObjectNamespace = (className = %s, serviceName = %s)", Quote(t.ClassName), Quote(svc))
}

func configJSON(t DurableObjectTarget, hosted bool) string {
	b, _ := json.Marshal(map[string]any{
		"namespace":  t.Namespace + "/" + t.Name,
		"shards":     t.Shards,
		"hosted":     hosted,
		"shardNames": t.ShardNames,
	})
	return string(b)
}

// binding renders the router binding for spec.bindings[i] (field) to namespace name.
func (d *doRender) binding(field string, ref v1alpha1.LocalObjectReference) (string, error) {
	name := ref.Name
	if name == "" {
		return "", fmt.Errorf("%s.durableObjectNamespace.name: required", field)
	}
	t, ok := d.in.DurableObjects[name]
	if !ok {
		return "", fmt.Errorf("%s.durableObjectNamespace.name: DurableObjectNamespace %q not found", field, name)
	}
	if err := checkTarget(name, t); err != nil {
		return "", fmt.Errorf("%s.durableObjectNamespace: %w", field, err)
	}
	d.bound[name] = t
	inner := []string{
		fmt.Sprintf("(name = \"NS\", %s)", d.nsDesignator(name, t)),
		fmt.Sprintf("(name = \"CONFIG\", json = %s)", Quote(configJSON(t, d.hosts(name)))),
	}
	for i := range t.ShardAddresses {
		inner = append(inner, fmt.Sprintf("(name = \"SHARD_%d\", service = %s)", i, Quote(shardService(name, i))))
	}
	if d.hosts(name) {
		inner = append(inner, fmt.Sprintf("(name = \"POD_NAME\", fromEnvironment = %s)", Quote(PodNameEnv)))
	}
	return fmt.Sprintf("wrapped = (moduleName = %s, innerBindings = [%s])", Quote(RouterModule), strings.Join(inner, ", ")), nil
}

func (d *doRender) any() bool { return d.host != nil || len(d.bound) > 0 }

func (d *doRender) boundNames() []string {
	names := make([]string, 0, len(d.bound))
	for n := range d.bound {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// workerFields are the user Worker's extra fields on a shard pod.
func (d *doRender) workerFields() string {
	if d.host == nil {
		return ""
	}
	t := d.host
	return fmt.Sprintf("      durableObjectNamespaces = [(className = %s, uniqueKey = %s, enableSql = %t, preventEviction = %t)],\n"+
		"      durableObjectStorage = (localDisk = %s),\n", Quote(t.ClassName), Quote(t.UniqueKey), t.SQL, t.PreventEviction, Quote(DOStorageService))
}

// services are the id-only namespaces, the shard gateways' external services, and on
// a shard pod the disk service and the gateway worker.
func (d *doRender) services() string {
	var c strings.Builder
	for _, name := range d.boundNames() {
		t := d.bound[name]
		if !d.hosts(name) {
			mod := fmt.Sprintf("// Mints ids of DurableObjectNamespace %s/%s; hosts nothing (its shards do).\nimport { DurableObject } from \"cloudflare:workers\";\nexport class %s extends DurableObject {}\nexport default {};\n", t.Namespace, t.Name, t.ClassName)
			fmt.Fprintf(&c, "    (name = %s, worker = (\n", Quote(idsService(name)))
			fmt.Fprintf(&c, "      modules = [(name = \"ids.js\", esModule = %s)],\n", Quote(mod))
			fmt.Fprintf(&c, "      compatibilityDate = %s,\n", Quote(ShimCompatibilityDate))
			fmt.Fprintf(&c, "      durableObjectNamespaces = [(className = %s, uniqueKey = %s)],\n", Quote(t.ClassName), Quote(t.UniqueKey))
			c.WriteString("      durableObjectStorage = (inMemory = void),\n")
			c.WriteString("    )),\n")
		}
		for i, a := range t.ShardAddresses {
			fmt.Fprintf(&c, "    (name = %s, external = (address = %s, http = (capnpConnectHost = %s))),\n",
				Quote(shardService(name, i)), Quote(a), Quote(podcontract.RPCConnectHost))
		}
	}
	if d.host != nil {
		t := d.host
		fmt.Fprintf(&c, "    (name = %s, disk = (writable = true)),\n", Quote(DOStorageService))
		fmt.Fprintf(&c, "    (name = %s, worker = (\n", Quote(GatewayService))
		fmt.Fprintf(&c, "      modules = [(name = %s, esModule = embed %s), (name = %s, esModule = embed %s)],\n",
			Quote(gatewayFile), Quote(podcontract.ShimSubdir+"/"+gatewayFile), Quote(routerCommonFile), Quote(podcontract.ShimSubdir+"/"+routerCommonFile))
		fmt.Fprintf(&c, "      compatibilityDate = %s,\n", Quote(ShimCompatibilityDate))
		fmt.Fprintf(&c, "      bindings = [(name = \"NS\", durableObjectNamespace = (className = %s, serviceName = %s)), (name = \"CONFIG\", json = %s), (name = \"POD_NAME\", fromEnvironment = %s)],\n",
			Quote(t.ClassName), Quote(d.svcName), Quote(configJSON(*t, true)), Quote(PodNameEnv))
		c.WriteString("    )),\n")
	}
	return c.String()
}

func (d *doRender) sockets() string {
	if d.host == nil {
		return ""
	}
	return fmt.Sprintf("    (name = %s, http = (capnpConnectHost = %s), service = %s),\n", Quote(podcontract.GatewaySocket), Quote(podcontract.RPCConnectHost), Quote(GatewayService))
}

// extensions is the config's `extensions` field holding the router modules.
func (d *doRender) extensions() string {
	if !d.any() {
		return ""
	}
	var c strings.Builder
	c.WriteString("  extensions = [(modules = [\n")
	fmt.Fprintf(&c, "    (name = %s, esModule = embed %s, internal = true),\n", Quote(RouterModule), Quote(podcontract.ShimSubdir+"/"+routerFile))
	fmt.Fprintf(&c, "    (name = %s, esModule = embed %s, internal = true),\n", Quote(RouterCommonModule), Quote(podcontract.ShimSubdir+"/"+routerCommonFile))
	fmt.Fprintf(&c, "    (name = %s, esModule = embed %s, internal = true),\n", Quote(FailureModule), Quote(podcontract.ShimSubdir+"/"+failureFile))
	if d.channels() {
		fmt.Fprintf(&c, "    (name = %s, esModule = embed %s, internal = true),\n", Quote(ChannelsModule), Quote(podcontract.ShimSubdir+"/"+channelsFile))
	}
	c.WriteString("  ])],\n")
	return c.String()
}

func (d *doRender) files() ([]File, error) {
	if !d.any() {
		return nil, nil
	}
	names := []string{routerFile, routerCommonFile, failureFile}
	if d.host != nil {
		names = append(names, gatewayFile)
	}
	if d.channels() {
		names = append(names, channelsFile)
	}
	var out []File
	for _, n := range names {
		b, err := shim.Source(n)
		if err != nil {
			return nil, err
		}
		out = append(out, newFile(podcontract.ShimSubdir+"/"+n, b, false))
	}
	return out, nil
}

// env is the shard pod's POD_NAME (downward API metadata.name).
func (d *doRender) env() []corev1.EnvVar {
	if d.host == nil {
		return nil
	}
	return []corev1.EnvVar{{Name: PodNameEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
}
