package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Durable Object rendering (docs/durable-objects.md). A durableObjectNamespace binding
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
	// DrainToken is what the shard pods' health socket requires to drain (DrainToken).
	DrainToken string
	// Shards is spec.shards (1..MaxShards).
	Shards int32
	// SQL is spec.sql (workerd enableSql); PreventEviction is spec.preventEviction.
	SQL, PreventEviction bool
	// ShardAddresses are "host:port" of the gateway socket of each shard the router
	// may call: at least Shards of them (TargetFor gives MaxShards; tests pass
	// loopback addresses).
	ShardAddresses []string
	// ShardSet names the shard pods ("<ShardSet>-<i>", for error messages).
	ShardSet string
	// ChannelsBinding is spec.channels.binding (default DefaultChannelsBinding) when
	// spec.channels.enabled, else "": the shard pods give the hosted class's Worker a
	// `wrapped` binding of that name to the channels client (docs/channels.md).
	ChannelsBinding string
	// ContainerImage is spec.container.image: the image of each object's container
	// (workerd's container.imageName), "" when the class runs none.
	ContainerImage string
	// OwnerWaitMs is how long a call waits for its shard's owner while it is away
	// (router.js, CONFIG.ownerWaitMs); 0 is the router's default, OwnerWaitSeconds. Tests shorten it.
	OwnerWaitMs int64
}

// OwnerWaitSeconds is how long a binding call waits for a Durable Object shard or a
// Workflow engine being replaced before it fails retryable: router.js OWNER_WAIT_MS and
// workflows-binding.js WAIT_MS (shim tests hold them to this value). A Worker pod's grace
// period includes it, so that a request waiting for an owner is not cut by its own
// pod's rollout.
const OwnerWaitSeconds = 120

// DefaultChannelsBinding is the env name of the channels client when
// spec.channels.binding is unset (api ChannelsSpec.binding).
const DefaultChannelsBinding = "CHANNELS"

// ChannelsModule is the internal extension module of the channels client (shim channels.js).
const ChannelsModule = "workerd-operator:channels"

const channelsFile = "channels.js"

// GatewayDrainPath is the gateway's drain endpoint, a shard pod's preStop hook: the
// gateway refuses new sessions and answers once no call is in flight (shim gateway.js).
// The hook calls it on the health socket, which forwards this path (and no other) to
// the gateway worker (shim health.js): the gateway socket requires a client
// certificate under internal TLS, which the kubelet does not present.
const GatewayDrainPath = "/_workerd-operator/drain"

// DrainTokenHeader carries a shard pod's drain token: the preStop hook sends it
// (httpHeaders) and health.js forwards GatewayDrainPath only when it matches.
const DrainTokenHeader = "X-Workerd-Operator-Drain-Token"

// DrainToken is the drain token of d's shard pods: a hash of d's uid, which the API
// server draws at random, so a pod of another namespace cannot know it; those who can
// read the pod spec or the rendered config of d's namespace can. "" without a uid
// (offline renders): the drain is refused.
func DrainToken(d *v1alpha1.DurableObjectNamespace) string {
	if d.UID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("workerd-operator drain\x00" + string(d.UID)))
	return hex.EncodeToString(sum[:16])
}

// ShardSetName is the name of the StatefulSet and of the headless Service of a
// DurableObjectNamespace: "<name>-do". Shard i is pod "<name>-do-<i>".
func ShardSetName(name string) string { return name + "-do" }

// UniqueKey is status.uniqueKey when set, else "<namespace>-<name>": the same in every
// pod and for every object of that name, so a namespace deleted with reclaimPolicy
// Retain and created again under its name gets the same object ids and storage
// directory, and finds its data. status.uniqueKey keeps the key of a namespace that
// already has one (older ones hold "<namespace>-<name>-<uid prefix>").
func UniqueKey(d *v1alpha1.DurableObjectNamespace) string {
	if d.Status.UniqueKey != "" {
		return d.Status.UniqueKey
	}
	return namespaceOr(d.Namespace) + "-" + d.Name
}

// TargetFor builds the DurableObjectTarget callers of d route by (Shards is
// d.RoutingShards()), with in-cluster gateway addresses
// "<name>-do-<i>.<name>-do.<namespace>.svc.<domain>:9093" (docs/pod-contract.md) for
// every shard d can ever have (MaxShards): a router learns a new count from the
// gateways while d is resharded, and must then reach shards its pod was not rendered
// for. Errors name the field: spec.shards outside 1..64.
func TargetFor(d *v1alpha1.DurableObjectNamespace, opts Options) (DurableObjectTarget, error) {
	return targetFor(d, d.RoutingShards(), opts)
}

// ShardName is the name of shard i's pod.
func (t DurableObjectTarget) ShardName(i int) string { return fmt.Sprintf("%s-%d", t.ShardSet, i) }

// HostTargetFor is the target of d's own shard pods: they serve and route by the
// count their StatefulSet is built for (d.ShardSetShards()).
func HostTargetFor(d *v1alpha1.DurableObjectNamespace, opts Options) (DurableObjectTarget, error) {
	return targetFor(d, d.ShardSetShards(), opts)
}

func targetFor(d *v1alpha1.DurableObjectNamespace, n int32, opts Options) (DurableObjectTarget, error) {
	if n < 1 || n > MaxShards {
		return DurableObjectTarget{}, fmt.Errorf("DurableObjectNamespace %s: spec.shards: %d is outside 1 to %d (api DurableObjectNamespace.spec.shards)", d.Name, n, MaxShards)
	}
	domain, ns := clusterDomain(opts), namespaceOr(d.Namespace)
	t := DurableObjectTarget{
		Namespace: ns, Name: d.Name, Worker: d.Spec.WorkerRef.Name, ClassName: d.Spec.ClassName,
		UniqueKey: UniqueKey(d), DrainToken: DrainToken(d), Shards: n, SQL: d.Spec.SQL, PreventEviction: d.Spec.PreventEviction,
		ShardSet: ShardSetName(d.Name),
	}
	if c := d.Spec.Container; c != nil {
		t.ContainerImage = c.Image
	}
	if c := d.Spec.Channels; c != nil && c.Enabled {
		t.ChannelsBinding = c.Binding
		if t.ChannelsBinding == "" {
			t.ChannelsBinding = DefaultChannelsBinding
		}
	}
	for i := int32(0); i < MaxShards; i++ {
		pod := fmt.Sprintf("%s-%d", t.ShardSet, i)
		t.ShardAddresses = append(t.ShardAddresses, fmt.Sprintf("%s.%s.%s.svc.%s:%d", pod, t.ShardSet, ns, domain, podcontract.GatewayPort))
	}
	return t, nil
}

// ShardArgs are Args(w) plus the gateway socket and the storage directory of a shard
// pod: --socket-addr=gateway=127.0.0.1:9193 --directory-path=do-storage=/var/lib/workerd/do.
func ShardArgs(w *v1alpha1.Worker) []string {
	return append(Args(w),
		socketAddr(podcontract.GatewaySocket, podcontract.GatewayPort),
		fmt.Sprintf("--directory-path=%s=%s", DOStorageService, DOStorageDir))
}

// doKind renders durableObjectNamespace bindings and, on a shard pod (Input.Host), the
// hosted class, its storage, the gateway and the channels binding.
type doKind struct {
	in      Input
	svcName string
	host    *DurableObjectTarget
	bound   map[string]DurableObjectTarget // by DurableObjectNamespace name
}

func newDOKind(in Input) (bindingKind, error) {
	d := &doKind{in: in, svcName: WorkerServiceName(in.Worker.Name), bound: map[string]DurableObjectTarget{}}
	if in.Host == "" {
		return d, nil
	}
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
	return d, nil
}

func checkTarget(name string, t DurableObjectTarget) error {
	switch {
	case t.Shards < 1 || t.Shards > MaxShards:
		return fmt.Errorf("DurableObjectNamespace %s: spec.shards: %d is outside 1 to %d (api DurableObjectNamespace.spec.shards)", name, t.Shards, MaxShards)
	case len(t.ShardAddresses) < int(t.Shards):
		return fmt.Errorf("DurableObjectNamespace %s: %d shard addresses for %d shards", name, len(t.ShardAddresses), t.Shards)
	case t.UniqueKey == "":
		return fmt.Errorf("DurableObjectNamespace %s: status.uniqueKey: empty", name)
	case t.ClassName == "":
		return fmt.Errorf("DurableObjectNamespace %s: spec.className: empty", name)
	}
	return nil
}

func (d *doKind) hosts(name string) bool { return d.host != nil && d.in.Host == name }

// channels reports whether the pods host a namespace with durable channels enabled.
func (d *doKind) channels() bool { return d.host != nil && d.host.ChannelsBinding != "" }

func idsService(name string) string { return "workerd-operator:do-ids:" + name }

func shardService(name string, i int) string {
	return fmt.Sprintf("workerd-operator:do-shard:%s:%d", name, i)
}

func configJSON(t DurableObjectTarget, hosted bool) string {
	c := map[string]any{
		"namespace": t.Namespace + "/" + t.Name,
		"shards":    t.Shards,
		"hosted":    hosted,
		"shardSet":  t.ShardSet,
	}
	if t.OwnerWaitMs > 0 {
		c["ownerWaitMs"] = t.OwnerWaitMs
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// binding renders the router binding: a `wrapped` binding over RouterModule holding the
// real namespace (NS), the routing config (CONFIG) and one service per shard (SHARD_<i>).
func (d *doKind) bind(field string, b v1alpha1.Binding) (string, error) {
	name := b.DurableObjectNamespace.Name
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
	ids := idsService(name)
	if d.hosts(name) {
		ids = d.svcName
	}
	inner := []string{
		tuple(named("NS"), kv("durableObjectNamespace", tuple(kv("className", Quote(t.ClassName)), kv("serviceName", Quote(ids))))),
		tuple(named("CONFIG"), kv("json", Quote(configJSON(t, d.hosts(name))))),
	}
	for i := range t.ShardAddresses {
		inner = append(inner, tuple(named(fmt.Sprintf("SHARD_%d", i)), kv("service", Quote(shardService(name, i)))))
	}
	if d.hosts(name) {
		inner = append(inner, tuple(named("POD_NAME"), kv("fromEnvironment", Quote(PodNameEnv))))
	}
	return wrapped(RouterModule, inner...), nil
}

// wrapped is a `wrapped` binding's value: module's default export given inner bindings.
func wrapped(module string, inner ...string) string {
	return kv("wrapped", tuple(kv("moduleName", Quote(module)), kv("innerBindings", list(inner...))))
}

// sidecarWrapped is a `wrapped` binding over module holding a service ("sidecar") and a
// JSON config ("config"): how user code reaches the sidecar without holding it.
func sidecarWrapped(module, service string, config any) string {
	cfg, _ := json.Marshal(config)
	return wrapped(module,
		tuple(named(podcontract.SidecarService), kv("service", Quote(service))),
		tuple(named("config"), kv("json", Quote(string(cfg)))))
}

func (d *doKind) contribute(x *extras) error {
	if err := d.addChannelsBinding(x); err != nil {
		return err
	}
	for _, name := range sortedKeys(d.bound) {
		d.writeBound(&x.services, name, d.bound[name])
	}
	if d.host != nil {
		d.writeHost(x)
	}
	if d.host == nil && len(d.bound) == 0 {
		return nil
	}
	x.addExtension(RouterModule, routerFile)
	x.addExtension(RouterCommonModule, routerCommonFile)
	x.addExtension(FailureModule, failureFile)
	shims := []string{routerFile, routerCommonFile, failureFile}
	if d.host != nil {
		shims = append(shims, gatewayFile)
	}
	if d.channels() {
		x.addExtension(ChannelsModule, channelsFile)
		shims = append(shims, channelsFile)
	}
	return x.addShims(shims...)
}

// addChannelsBinding gives the hosted class's Worker its binding to the channels client
// (docs/channels.md), when the pods host a namespace with channels.
func (d *doKind) addChannelsBinding(x *extras) error {
	if !d.channels() {
		return nil
	}
	name := d.host.ChannelsBinding
	if j, dup := x.names[name]; dup {
		return fmt.Errorf("spec.bindings[%d].name: %q is the channels binding of DurableObjectNamespace %s (its spec.channels.binding); rename one of them", j, name, d.in.Host)
	}
	x.bindings = append(x.bindings, bindingLine{name, sidecarWrapped(ChannelsModule, podcontract.SidecarService, map[string]string{"namespace": d.host.Name})})
	return nil
}

// writeBound writes the services of bound namespace name: an id-only namespace (unless
// this pod hosts it) and the shard gateways' external services.
func (d *doKind) writeBound(c *capnp, name string, t DurableObjectTarget) {
	if !d.hosts(name) {
		mod := fmt.Sprintf("// Mints ids of DurableObjectNamespace %s/%s; hosts nothing (its shards do).\nimport { DurableObject } from \"cloudflare:workers\";\nexport class %s extends DurableObject {}\nexport default {};\n", t.Namespace, t.Name, t.ClassName)
		c.openWorker(idsService(name))
		c.field("modules", list(tuple(named("ids.js"), kv("esModule", Quote(mod)))))
		c.field("compatibilityDate", Quote(ShimCompatibilityDate))
		c.field("durableObjectNamespaces", list(tuple(kv("className", Quote(t.ClassName)), kv("uniqueKey", Quote(t.UniqueKey)))))
		c.field("durableObjectStorage", "(inMemory = void)")
		c.closeWorker()
	}
	for i, a := range t.ShardAddresses {
		c.item(named(shardService(name, i)), kv("external", external(d.in.Options, t.Namespace, a, rpcOptions())))
	}
}

// writeHost writes a shard pod's parts: the hosted class on localDisk, the disk
// service, the gateway worker and its socket, and POD_NAME.
func (d *doKind) writeHost(x *extras) {
	t := d.host
	ns := []string{kv("className", Quote(t.ClassName)), kv("uniqueKey", Quote(t.UniqueKey)),
		kv("enableSql", fmt.Sprint(t.SQL)), kv("preventEviction", fmt.Sprint(t.PreventEviction))}
	if t.ContainerImage != "" {
		ns = append(ns, kv("container", tuple(kv("imageName", Quote(t.ContainerImage)))))
		x.worker.field("containerEngine", ContainerEngine())
	}
	x.worker.field("durableObjectNamespaces", list(tuple(ns...)))
	x.worker.field("durableObjectStorage", tuple(kv("localDisk", Quote(DOStorageService))))
	c := &x.services
	c.item(named(DOStorageService), "disk = (writable = true)")
	c.openWorker(GatewayService)
	c.field("modules", list(shimModule(gatewayFile), shimModule(routerCommonFile)))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	c.field("bindings", list(
		tuple(named("NS"), kv("durableObjectNamespace", tuple(kv("className", Quote(t.ClassName)), kv("serviceName", Quote(d.svcName))))),
		tuple(named("CONFIG"), kv("json", Quote(configJSON(*t, true)))),
		tuple(named("POD_NAME"), kv("fromEnvironment", Quote(PodNameEnv)))))
	c.closeWorker()
	x.sockets.item(named(podcontract.GatewaySocket), serverSocket(rpcOptions()), kv("service", Quote(GatewayService)))
	// The preStop hook drains through the health socket (plain HTTP: the kubelet has no
	// client certificate); health.js forwards GatewayDrainPath only, with DRAIN_TOKEN.
	x.healthBindings = append(x.healthBindings, tuple(named("GATEWAY"), kv("service", Quote(GatewayService))),
		tuple(named("DRAIN_TOKEN"), kv("text", Quote(t.DrainToken))))
	x.env = append(x.env, corev1.EnvVar{Name: PodNameEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
}

// ContainerEngine is the Worker's containerEngine on a shard pod whose class runs
// containers: Docker's API on the sidecar's socket, relative to the workerd container's
// working directory (podcontract.ConfigDir).
func ContainerEngine() string {
	return tuple(kv("localDocker", tuple(kv("socketPath", Quote("unix:"+podcontract.ContainersSubdir+"/"+podcontract.ContainersSocket)),
		kv("containerEgressInterceptorImage", Quote(podcontract.ContainersEgressImage)))))
}

// shimModule is an ES module list entry embedding shim file (named after the file).
func shimModule(file string) string {
	return tuple(named(file), kv("esModule", embed(podcontract.ShimSubdir+"/"+file)))
}
