// Package podcontract is the one home of the contract between the operator, the pods it
// runs and the processes inside them (docs/pod-contract.md): ports, socket and service
// names, paths, container names, labels and the pinned versions. Every other package
// refers to these names; TestNoStrayLiterals keeps the literals here.
package podcontract

// Pinned versions. hack/ scripts and the Makefile carry the same defaults.
const (
	// WorkerdVersion is the npm version of the pinned workerd.
	WorkerdVersion = "1.20261117.1"
	// KubernetesVersion is the version of the control-plane binaries built for tests and
	// `make dev`.
	KubernetesVersion = "1.37.2"
)

// Images.
const (
	// ImageRepository is the registry path the project's images are published under.
	ImageRepository = "ghcr.io/workerd-operator"
	// WorkerdImageRepository is the repository of the workerd images; a tag is a workerd
	// version (spec.runtime.version).
	WorkerdImageRepository = ImageRepository + "/workerd"
	// DefaultWorkerdImage runs the pinned workerd.
	DefaultWorkerdImage = WorkerdImageRepository + ":" + WorkerdVersion
	// DefaultOperatorImage is the manager's image; it also runs as the sidecar.
	DefaultOperatorImage = ImageRepository + "/workerd-operator:dev"
)

// Ports of a workerd pod.
const (
	// DefaultHTTPPort is the http socket's port when spec.service.port is unset.
	DefaultHTTPPort = 8080
	// HealthPort serves GET /healthz and /readyz (shim health.js).
	HealthPort = 9090
	// TriggerPort serves POST /scheduled, POST /scheduled-batch and
	// /cdn-cgi/local/scheduled (shim trigger.js).
	TriggerPort = 9091
	// SidecarPort is where the sidecar listens; workerd reaches it as external service
	// SidecarService.
	SidecarPort = 9092
	// GatewayPort is the gateway socket of Durable Object shards and workflow engines.
	GatewayPort = 9093
	// RunnerPort is the workflows socket of an engine pod: the runner worker the engine
	// calls to run an instance.
	RunnerPort = 9094
	// RPCPort is the rpc socket: the user's Worker with capnpConnectHost =
	// RPCConnectHost, where other Workers' service bindings connect. It is a port of the
	// Worker's Service but never the http port, so clients of the http port (an
	// Ingress, a LoadBalancer) cannot open Cap'n Proto RPC to the Worker.
	RPCPort = 9095
)

// FrontedSocket is a cross-pod workerd socket the sidecar fronts: workerd offers no
// connection cap nor handshake timeout (its config schema has neither), so it listens
// on LoopbackHost:InnerPort and the sidecar owns the pod IP's Port, terminating mutual
// TLS with bounds (internal/sidecar relay.go, docs/security.md) and trusting only the
// CA in TrustedCA.
type FrontedSocket struct {
	Name            string
	Port, InnerPort int32
	TrustedCA       string
}

// FrontedSockets are the sockets the sidecar fronts; InnerPort is Port + 100.
var FrontedSockets = []FrontedSocket{
	{TriggerSocket, TriggerPort, TriggerPort + innerOffset, InternalTLSManagerCA},
	{GatewaySocket, GatewayPort, GatewayPort + innerOffset, InternalTLSCA},
	{RPCSocket, RPCPort, RPCPort + innerOffset, InternalTLSCA},
}

const innerOffset = 100

// Fronted is the fronted socket named name, ok false for the others.
func Fronted(name string) (FrontedSocket, bool) {
	for _, f := range FrontedSockets {
		if f.Name == name {
			return f, true
		}
	}
	return FrontedSocket{}, false
}

// ReservedPorts are the pod's own ports besides the http socket: spec.service.port may
// not take one of them.
var ReservedPorts = []int32{HealthPort, TriggerPort, SidecarPort, GatewayPort, RunnerPort, RPCPort}

// DevRegistryPort is the port of the local cluster's OCI registry (`make dev`), on
// 127.0.0.1: `import --image localhost:5001/NAME --push` pushes there and the local
// kubelet pulls image volumes from it. Not part of a pod.
const DevRegistryPort = 5001

// DevContext is the kubeconfig context (and cluster) name of the local cluster's
// kubeconfig: `deploy` pushes to the DevRegistryPort registry when it is current.
const DevContext = "devcluster"

// Socket names of the rendered config (workerd --socket-addr=<name>=...).
const (
	HTTPSocket     = "http"
	RPCSocket      = "rpc"
	HealthSocket   = "health"
	TriggerSocket  = "trigger"
	GatewaySocket  = "gateway"
	WorkflowSocket = "workflows"
)

// Port names on containers and Services.
const (
	HTTPPortName    = "http"
	RPCPortName     = "rpc"
	HealthPortName  = "health"
	TriggerPortName = "trigger"
	SidecarPortName = "sidecar"
	GatewayPortName = "gateway"
	// HTTPAppProtocol is the appProtocol of the Service's http port.
	HTTPAppProtocol = "http"
)

// Names in the rendered config.
const (
	// SidecarService is the external service name of the sidecar
	// (--external-addr=sidecar=...).
	SidecarService = "sidecar"
	// InternetService is workerd's reserved name of the network service a Worker's
	// globalOutbound defaults to; the operator renders it from spec.outbound.
	InternetService = "internet"
	// HealthService and TriggerService are the shim workers' service names.
	HealthService  = "workerd-operator:health"
	TriggerService = "workerd-operator:trigger"
	// IngressService is the shim worker (ingress.js) the http socket serves: it keeps
	// the loop limit (CF-EW-Via) in front of the Worker's http service.
	IngressService = "workerd-operator:ingress"
	// AssetsService is the assets service (workerd's AssetsService) of a Worker with
	// spec.assets: the http socket's service, routing each request to a file or to the
	// user's Worker; AssetWorkerEntrypoint is its entrypoint that serves files only,
	// which the assets binding names.
	AssetsService         = "workerd-operator:assets"
	AssetWorkerEntrypoint = "AssetWorker"
	// TailService is the streaming tail worker (shim tail.js) every user Worker's
	// streamingTails names; it posts one record per invocation to the sidecar's
	// TailPath (docs/observability.md).
	TailService = "workerd-operator:tail"
	// TailPath is the sidecar's pod-internal endpoint for those records.
	TailPath = "/tail/v1/invocations"
	// RPCConnectHost is the capnpConnectHost of the rpc socket and of the external
	// services to other Workers: a CONNECT to this host opens Cap'n Proto RPC, which
	// carries JS RPC between workerd processes. The http socket does not set it.
	RPCConnectHost = "capnp.workerd-operator.internal"
	// SecretEnvPrefix prefixes the env var of a secretKeyRef binding:
	// WORKERD_SECRET_<name>.
	SecretEnvPrefix = "WORKERD_SECRET_"
	// HyperdriveSubdir holds, relative to ConfigDir, one directory per hyperdrive
	// binding: the binding's Secret mounted as files the config embeds.
	HyperdriveSubdir = "hyperdrive"
	// HyperdriveEnvPrefix prefixes the env vars of a hyperdrive binding's host and port:
	// WORKERD_HYPERDRIVE_<name>_HOST and _PORT (the database's address, a workerd flag).
	HyperdriveEnvPrefix = "WORKERD_HYPERDRIVE_"
	// R2BucketHeader names the R2Bucket of an R2 binding call: each r2Bucket binding's
	// external service (R2ServicePrefix + the R2Bucket's name, an alias of the sidecar)
	// injects it, and the sidecar's R2 gateway (internal/sidecar/r2) reads it.
	R2BucketHeader = "X-Workerd-Operator-R2-Bucket"
	// R2ServicePrefix prefixes the external service of an R2Bucket in the config.
	R2ServicePrefix = "r2:"
	// AIBindingHeader names the ai binding of a Workers AI call: each ai binding's
	// external service (AIServicePrefix + the binding's name, an alias of the sidecar)
	// injects it, and the sidecar's AI gateway (internal/sidecar/ai) reads it.
	AIBindingHeader = "X-Workerd-Operator-AI-Binding"
	// AIServicePrefix prefixes the external service of an ai binding in the config.
	AIServicePrefix = "ai:"
	// AIConfigEnv is the sidecar's env var holding its ai bindings as JSON
	// (internal/sidecar/ai.BindingConfig); AIEnvPrefix prefixes the env vars of each
	// binding's Secret keys.
	AIConfigEnv = "WORKERD_OPERATOR_AI_BINDINGS"
	AIEnvPrefix = "WORKERD_OPERATOR_AI_"
	// DispatchNamespaceHeader names the dispatch namespace of a dispatched call: each
	// dispatchNamespace binding's external service (DispatchServicePrefix + the binding's
	// name, an alias of the sidecar) injects it; the binding's module (shim dispatch.js)
	// sets DispatchScriptHeader to the user Worker's name, and the sidecar's dispatcher
	// (internal/sidecar/dispatch) answers DispatchErrorHeader: not-found when the
	// namespace has no such Worker.
	DispatchNamespaceHeader = "X-Workerd-Operator-Dispatch-Namespace"
	DispatchScriptHeader    = "X-Workerd-Operator-Dispatch-Script"
	DispatchErrorHeader     = "X-Workerd-Operator-Dispatch-Error"
	DispatchNotFound        = "not-found"
	// DispatchProtoHeader carries the scheme of the URL the dispatch Worker gave; the
	// sidecar passes it on as ForwardedProtoHeader, which a user Worker's rpc socket reads
	// (workerd's forwardedProtoHeader), so request.url keeps its https.
	DispatchProtoHeader  = "X-Workerd-Operator-Dispatch-Proto"
	ForwardedProtoHeader = "X-Forwarded-Proto"
	// DispatchServicePrefix prefixes the external service of a dispatchNamespace binding.
	DispatchServicePrefix = "dispatch:"
	// DispatchDomainEnv is the sidecar's env var naming the DNS domain of the pod's
	// namespace ("<namespace>.svc.<cluster domain>"), under which user Workers' dispatch
	// Services resolve.
	DispatchDomainEnv = "WORKERD_OPERATOR_DISPATCH_DOMAIN"
	// DispatchResolveHeader marks shim dispatch.js's question to the sidecar: where
	// does the user Worker run, and with what code when it is Shared (render.LoaderCode);
	// its If-None-Match names the code the shim has.
	DispatchResolveHeader = "X-Workerd-Operator-Dispatch-Resolve"
	// DispatchAPIEnv is the sidecar's env var naming the manager's internal API
	// (ContainersAPIURL), from which it reads Shared user Workers' code.
	DispatchAPIEnv = "WORKERD_OPERATOR_DISPATCH_API"
	// DispatchLoaderService is the network service Shared user Workers' fetch() and
	// connect() go through in their dispatch Workers' pods (globalOutbound of each
	// loaded isolate): the rules of a Dedicated user Worker without spec.outbound.
	DispatchLoaderService = "workerd-operator:user-workers-internet"
	// CacheService is the Cache API's service in the config (every Worker's
	// cacheApiOutbound): an alias of the sidecar, HTTP proxy style (the full URL as the
	// request target), whose requests carry CacheHeader; the sidecar's per-pod cache
	// (internal/sidecar/cache) answers them, whatever their path.
	CacheService = "workerd-operator:cache"
	// CacheHeader marks the Cache API's requests to the sidecar.
	CacheHeader = "X-Workerd-Operator-Cache"
	// R2ConfigEnv is the sidecar's env var holding its R2 buckets as JSON (endpoint,
	// bucket, region and the env vars of the credentials, never the credentials).
	R2ConfigEnv = "WORKERD_OPERATOR_R2_BUCKETS"
	// R2CredentialsEnvPrefix prefixes the sidecar's env vars of an R2Bucket's
	// credentials: WORKERD_R2_<n>_ACCESS_KEY_ID and _SECRET_ACCESS_KEY, from its Secret.
	R2CredentialsEnvPrefix = "WORKERD_R2_"
	// SidecarOutboundEnv is the sidecar's env var holding, as JSON ({"allow": [...],
	// "deny": [...]}, internal/outbound.Rules), the Worker's outbound rules: spec.outbound
	// within the admin's policy, the rules of its network service and NetworkPolicy
	// egress. Set with R2ConfigEnv: the R2 gateway connects only where they allow.
	SidecarOutboundEnv = "WORKERD_OPERATOR_OUTBOUND"
	// RequestCFPath is the sidecar's pod-internal endpoint the ingress shim asks for a
	// request's cf object (internal/requestcf, docs/request-cf.md):
	// GET <path>?peer=&connecting=&forwarded=.
	RequestCFPath = "/request-cf/v1/"
	// GeoIPDir is where the sidecar of a Worker pod mounts the operator's GeoIP image
	// (manager --request-cf-geoip-image): every *.mmdb file in it is read.
	GeoIPDir = "/etc/workerd-operator/geoip"
	// BackupConfigEnv holds the sidecar's continuous backup target as JSON
	// (backup.Config) on the pods of a store with spec.backup (docs/backup.md); the
	// restore init container reads it too, to recover a lost volume.
	BackupConfigEnv = "WORKERD_OPERATOR_BACKUP"
	// BackupAccessKeyIDEnv and BackupSecretAccessKeyEnv carry the backup bucket's
	// credentials, from spec.backup.s3.credentialsSecret (secretKeyRef only).
	BackupAccessKeyIDEnv     = "WORKERD_OPERATOR_BACKUP_ACCESS_KEY_ID"
	BackupSecretAccessKeyEnv = "WORKERD_OPERATOR_BACKUP_SECRET_ACCESS_KEY"
	// RestoreConfigEnv holds spec.restore as JSON (backup.Config with its point in
	// time) for the restore init container of a store that starts from a backup.
	RestoreConfigEnv = "WORKERD_OPERATOR_RESTORE"
	// RestoreAccessKeyIDEnv and RestoreSecretAccessKeyEnv carry the restore source's
	// credentials, from spec.restore.s3.credentialsSecret.
	RestoreAccessKeyIDEnv     = "WORKERD_OPERATOR_RESTORE_ACCESS_KEY_ID"
	RestoreSecretAccessKeyEnv = "WORKERD_OPERATOR_RESTORE_SECRET_ACCESS_KEY"
	// PodIPEnv is the container env var holding the pod IP (downward API).
	PodIPEnv = "POD_IP"
	// MemoryLimitEnv is the sidecar's env var holding its container's memory limit in
	// bytes (downward API, resourceFieldRef limits.memory); the sidecar sets its Go
	// memory limit (GOMEMLIMIT) to 90% of it unless GOMEMLIMIT is set.
	MemoryLimitEnv = "WORKERD_OPERATOR_MEMORY_LIMIT"
)

// Containers.
const (
	WorkerdContainer = "workerd"
	SidecarContainer = "sidecar"
	// SidecarCommand is the subcommand of the operator's binary the sidecar container
	// runs (its first argument).
	SidecarCommand = "sidecar"
	// ImageCheckContainer is the init container, first of a pod with image volumes
	// (spec.source.image, spec.assets), that refuses to let workerd start while one
	// holds a symbolic link out of it (internal/imagecheck). It runs the operator's
	// image with ImageCheckCommand and one "<field>=<mount path>" argument per volume.
	ImageCheckContainer = "image-check"
	// ImageCheckCommand is the subcommand of the operator's binary it runs.
	ImageCheckCommand = "check-image-volumes"
	// RestoreContainer is the init container of a store's pod with spec.backup or
	// spec.restore: before workerd starts, it fills an empty volume from the backup
	// (docs/backup.md) and fails, so the pod never serves, when that is impossible.
	RestoreContainer = "restore"
	// RestoreCommand is the subcommand of the operator's binary it runs.
	RestoreCommand = "restore-store"
	// RunAsUser is distroless's "nonroot" user.
	RunAsUser = 65532
)

// Paths inside the containers.
const (
	// ConfigDir is where the pod mounts the rendered files.
	ConfigDir = "/etc/workerd"
	// ConfigFile is the config's path relative to ConfigDir.
	ConfigFile = "config.capnp"
	// ModulesSubdir is the directory, relative to ConfigDir, holding the user's modules.
	ModulesSubdir = "modules"
	// ModulesDir is ModulesSubdir as an absolute path in the workerd container.
	ModulesDir = ConfigDir + "/" + ModulesSubdir
	// ShimSubdir is the directory, relative to ConfigDir, holding the injected shims.
	ShimSubdir = "shim"
	// AssetsSubdir is the directory, relative to ConfigDir, where the pod mounts
	// spec.assets (the image's directory). workerd resolves an assets service's path
	// against its working directory, so the workerd container of a Worker with assets
	// runs in ConfigDir.
	AssetsSubdir = "assets"
	// AssetsDir is AssetsSubdir as an absolute path in the workerd container.
	AssetsDir = ConfigDir + "/" + AssetsSubdir
	// SidecarDataDir is the sidecar's state directory (a PVC on shard and engine pods).
	SidecarDataDir = "/var/lib/workerd-operator"
	// BackupStateSubdir, under the sidecar's data directory (the store's PVC), keeps the
	// backup's scratch files.
	BackupStateSubdir = "backup"
)

// Labels and annotations on every child object and pod.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "fleet.workerd-operator.io/component"
	LabelWorker    = "fleet.workerd-operator.io/worker"
	LabelDONS      = "fleet.workerd-operator.io/durable-object-namespace"
	LabelWorkflow  = "fleet.workerd-operator.io/workflow"
	// LabelDispatchNamespace marks the pods of a user Worker with its dispatch namespace;
	// LabelDispatcherPrefix + a dispatch namespace marks the pods of a Worker that binds
	// it: the user Workers' rpc port admits only those (docs/dispatch.md).
	LabelDispatchNamespace = "fleet.workerd-operator.io/dispatch-namespace"
	LabelDispatcherPrefix  = "dispatcher.fleet.workerd-operator.io/"
	// Data store host pods (docs/kv.md, docs/d1.md, docs/queues.md): the owner's name.
	LabelKVNamespace = "fleet.workerd-operator.io/kv-namespace"
	LabelD1Database  = "fleet.workerd-operator.io/d1-database"
	LabelQueue       = "fleet.workerd-operator.io/queue"

	// AnnotationVersion on the pod template is the rendered config's content hash.
	AnnotationVersion = "fleet.workerd-operator.io/version"
	// AnnotationInputs on the pod template hashes the referenced Secrets' and
	// ConfigMaps' resourceVersions, so a change of their data rolls the pods.
	AnnotationInputs = "fleet.workerd-operator.io/inputs"
	// LabelWorkerVersion on a Worker's pods and stored versions is the Worker version's
	// id (docs/versions.md).
	LabelWorkerVersion = "fleet.workerd-operator.io/worker-version"
	// LabelSplit on a Worker's pods is "true" for the split Deployment's (the second
	// version of a gradual deployment), "false" for the Worker's own Deployment's.
	LabelSplit = "fleet.workerd-operator.io/split"
	// AnnotationSplit on a Worker's pod template is the gradual deployment its ingress
	// keeps ("id@percentage,id@percentage"); absent when it serves every request itself.
	AnnotationSplit = "fleet.workerd-operator.io/split"
	// AnnotationVersionMessage on a Worker is the message its next stored version gets
	// (wrangler's --message).
	AnnotationVersionMessage = "fleet.workerd-operator.io/version-message"

	ComponentWorker         = "worker"
	ComponentDOShard        = "do-shard"
	ComponentWorkflowEngine = "workflow-engine"
	ComponentDataStore      = "data-store"
	// ComponentWorkerVersion labels a Worker's stored versions (ConfigMaps).
	ComponentWorkerVersion = "worker-version"

	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "workerd-operator"
	// AppName is the value of LabelName.
	AppName = "workerd"
	// FieldOwner is the server-side apply field manager of every object the operator
	// writes.
	FieldOwner = "workerd-operator"
)

// The manager's pods carry LabelName: ManagerAppName and LabelAppComponent:
// ManagerComponent (config/manager and the chart; a Deployment's selector cannot
// change). The workerd pods' NetworkPolicies admit the manager by these labels and by
// LabelNamespaceName of its namespace.
const (
	LabelAppComponent = "app.kubernetes.io/component"
	ManagerAppName    = "workerd-operator"
	ManagerComponent  = "manager"
	// LabelNamespaceName is the label the API server sets on every Namespace: its name.
	LabelNamespaceName = "kubernetes.io/metadata.name"
)

// ManagerPodLabels are the labels every manager pod carries.
func ManagerPodLabels() map[string]string {
	return map[string]string{LabelName: ManagerAppName, LabelAppComponent: ManagerComponent}
}

// The internal plane (docs/security-internal-plane.md). Paths that stay inside a pod
// (workerd ↔ its sidecar, the sidecar → the runner) listen on LoopbackHost; cross-pod
// sockets (rpc, gateway, trigger, the sidecar's engine API) are mutual TLS with
// certificates issued by the operator: one CA per namespace, so a caller reaches only
// pods of its own namespace, plus the manager's CA, trusted by the trigger socket and
// the sidecar.
const (
	// LoopbackHost is the address of pod-internal listeners. The local cluster maps it
	// to an address of the pod's own (internal/devcluster).
	LoopbackHost = "127.0.0.1"
	// InternalTLSSecret is the Secret, in every namespace with workerd pods, holding the
	// namespace's CA and certificate (InternalTLS* keys) and the manager's CA.
	InternalTLSSecret = "workerd-internal-tls"
	// InternalTLSVolume is the pod volume of InternalTLSSecret (without the CA key),
	// mounted at InternalTLSDir in both containers.
	InternalTLSVolume = "internal-tls"
	// InternalTLSSubdir is InternalTLSDir relative to ConfigDir (the config embeds the
	// files from there).
	InternalTLSSubdir = "tls"
	// InternalTLSDir is where the pod's containers read the files.
	InternalTLSDir = ConfigDir + "/" + InternalTLSSubdir
	// Keys of InternalTLSSecret (and file names under InternalTLSDir).
	InternalTLSCert      = "tls.crt"
	InternalTLSKey       = "tls.key"
	InternalTLSCA        = "ca.crt"
	InternalTLSCAKey     = "ca.key"
	InternalTLSManagerCA = "manager-ca.crt"
	// ManagerCASecret is the Secret, in the manager's namespace, holding the manager's
	// CA and client certificate (keys InternalTLSCA, InternalTLSCAKey, InternalTLSCert,
	// InternalTLSKey).
	ManagerCASecret = "workerd-operator-internal-ca"
	// InternalDomain is the suffix of InternalServerName.
	InternalDomain = "workerd-operator.internal"
)

// InternalServerName is the DNS name in the certificate of namespace ns's pods, the name
// every client of the internal plane checks: "<ns>.ns.workerd-operator.internal".
func InternalServerName(ns string) string { return ns + ".ns." + InternalDomain }

// MarkerHeaders are the headers by which the sidecar routes a pod-internal request to
// one of its gateways. Each alias injects exactly one, so a request carrying two got the
// other from the Worker's own code (a Cache API request's headers are the Worker's) and
// is refused.
var MarkerHeaders = []string{CacheHeader, AIBindingHeader, DispatchNamespaceHeader, R2BucketHeader}
