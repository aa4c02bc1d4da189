package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ModuleType is the kind of a Worker module, as workerd's Worker.Module union names it.
// +kubebuilder:validation:Enum=ESModule;CommonJS;Text;Data;Wasm;JSON
type ModuleType string

// Module types (workerd.capnp Worker.Module: esModule, commonJsModule, text, data, wasm, json).
const (
	ModuleESModule ModuleType = "ESModule"
	ModuleCommonJS ModuleType = "CommonJS"
	ModuleText     ModuleType = "Text"
	ModuleData     ModuleType = "Data"
	ModuleWasm     ModuleType = "Wasm"
	ModuleJSON     ModuleType = "JSON"
)

// LimitProfile names a set of platform limits from internal/limits (docs/limits.md).
// +kubebuilder:validation:Enum=free;paid;custom
type LimitProfile string

// Limit profiles.
const (
	ProfileFree   LimitProfile = "free"
	ProfilePaid   LimitProfile = "paid"
	ProfileCustom LimitProfile = "custom"
)

// DispatchPlacement is where a user Worker of a dispatch namespace runs.
type DispatchPlacement string

// Dispatch placements.
const (
	// DispatchPlacementDedicated: the user Worker's own pods (the default).
	DispatchPlacementDedicated DispatchPlacement = "Dedicated"
	// DispatchPlacementShared: an isolate in its dispatch Workers' pods.
	DispatchPlacementShared DispatchPlacement = "Shared"
)

// WorkerSpec is what a Worker runs: its code, compatibility, bindings and limits, and
// how many workerd pods serve it.
// +kubebuilder:validation:XValidation:rule="!has(self.runtime) || !has(self.runtime.image) || has(self.runtime.version)",message="spec.runtime.image needs spec.runtime.version: the operator must know which workerd an image holds"
// +kubebuilder:validation:XValidation:rule="has(self.source) || has(self.assets)",message="spec.source is required unless spec.assets is set (an assets-only Worker)"
// +kubebuilder:validation:XValidation:rule="!has(self.assets) || has(self.assets.image) || (has(self.source) && has(self.source.image))",message="spec.assets.image is required unless spec.source.image names the image"
// +kubebuilder:validation:XValidation:rule="has(self.source) || !has(self.bindings) || size(self.bindings) == 0",message="an assets-only Worker (no spec.source) has no code to give spec.bindings to"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.dispatchNamespace) == has(self.dispatchNamespace) && (!has(self.dispatchNamespace) || self.dispatchNamespace == oldSelf.dispatchNamespace)",fieldPath=".dispatchNamespace",message="cannot be set, changed or removed once the Worker exists: a Worker is a user Worker of one dispatch namespace, or none, for its whole life; delete it and create it again. Two dispatch namespaces that hold Workers of the same name need two Kubernetes namespaces (docs/dispatch.md)"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.dispatchPlacement) ? oldSelf.dispatchPlacement : 'Dedicated') == (has(self.dispatchPlacement) ? self.dispatchPlacement : 'Dedicated')",fieldPath=".dispatchPlacement",message="cannot be changed once the Worker exists: delete the user Worker and create it again (docs/dispatch.md)"
// +kubebuilder:validation:XValidation:rule="!has(self.dispatchPlacement) || self.dispatchPlacement == 'Dedicated' || !has(self.replicas)",fieldPath=".replicas",message="a Shared user Worker has no pods of its own to scale: it runs in its dispatch Workers' pods (docs/dispatch.md)"
// +kubebuilder:validation:XValidation:rule="!has(self.dispatchPlacement) || self.dispatchPlacement == 'Dedicated' || has(self.dispatchNamespace)",fieldPath=".dispatchPlacement",message="Shared needs spec.dispatchNamespace: only a user Worker of a dispatch namespace runs in its dispatch Workers' pods (docs/dispatch.md)"
// +kubebuilder:validation:XValidation:rule="has(self.source) || !has(self.assets) || (!has(self.assets.binding) && !has(self.assets.runWorkerFirst))",message="spec.assets.binding and runWorkerFirst need a Worker script (spec.source); an assets-only Worker has none"
type WorkerSpec struct {
	// compatibilityDate is the workerd compatibility date, YYYY-MM-DD. It may not be
	// later than the newest date the pinned workerd supports (checked at admission).
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`
	// +required
	CompatibilityDate string `json:"compatibilityDate"`

	// compatibilityFlags are workerd compatibility flags, e.g. "nodejs_compat" (lowercase
	// letters, digits, "_" and "-": a few workerd flags have hyphens, e.g.
	// "fixup-transform-stream-backpressure"). At most 64.
	// Experimental flags are rejected unless the limit profile allows them.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9_-]+$`
	// +kubebuilder:validation:items:MaxLength=128
	// +listType=set
	// +optional
	CompatibilityFlags []string `json:"compatibilityFlags,omitempty"`

	// source holds the Worker's code: exactly one of inline, configMap or image. It may
	// be left out only with spec.assets: an assets-only Worker, which serves its files and
	// answers 404 (or its not-found handling) for anything else.
	// +optional
	Source WorkerSource `json:"source,omitzero"`

	// assets serves a directory of static files in front of the Worker, as Cloudflare
	// serves a Worker's assets (wrangler's `assets`): see docs/assets.md.
	// +optional
	Assets *WorkerAssets `json:"assets,omitempty"`

	// dispatchNamespace makes this Worker a user Worker of that dispatch namespace
	// (Workers for Platforms; wrangler deploy --dispatch-namespace): Workers of the
	// namespace with a dispatchNamespace binding naming it reach it by its name, and its
	// rpc port admits only them. Its code reaches no cluster address (docs/dispatch.md).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters (docs/dispatch.md)"
	// +optional
	DispatchNamespace string `json:"dispatchNamespace,omitempty"`

	// dispatchPlacement says where a user Worker runs: Dedicated (the default) in pods of
	// its own, as every Worker; Shared as an isolate inside the pods of its dispatch
	// namespace's dispatch Workers, loaded on its first call, as Cloudflare runs user
	// Workers: no pod of its own, about 2 MiB instead of ~150 MiB. A Shared Worker takes
	// inline or ConfigMap modules and text and json bindings only (docs/dispatch.md).
	// +kubebuilder:validation:Enum=Dedicated;Shared
	// +optional
	DispatchPlacement DispatchPlacement `json:"dispatchPlacement,omitempty"`

	// bindings are what the Worker sees in env, by name. At most 128.
	// +kubebuilder:validation:MaxItems=128
	// +listType=map
	// +listMapKey=name
	// +optional
	Bindings []Binding `json:"bindings,omitempty"`

	// tails are Workers of the same namespace that receive this Worker's tail events
	// (their tail() handler: outcome, logs, exceptions per invocation), like wrangler's
	// tail_consumers
	// (https://developers.cloudflare.com/workers/observability/logs/tail-workers/).
	// The operator's own tail worker feeds the metrics either way (docs/observability.md).
	// At most 16.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=service
	// +optional
	Tails []TailConsumer `json:"tails,omitempty"`

	// limits are the platform limits this Worker runs under.
	// +optional
	Limits *WorkerLimits `json:"limits,omitempty"`

	// replicas is the number of workerd pods serving the Worker, 0 to 1000. Default 1.
	// The /scale subresource targets this field (HPA, KEDA, kubectl scale).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// runtime selects the workerd build. Default: the operator's pinned workerd.
	// +optional
	Runtime *RuntimeSpec `json:"runtime,omitempty"`

	// pod passes scheduling and metadata settings through to the workerd pods.
	// +optional
	Pod *PodOverrides `json:"pod,omitempty"`

	// service configures the Service in front of the pods.
	// +optional
	Service *WorkerServiceSpec `json:"service,omitempty"`

	// outbound says where the Worker's code may connect: fetch() to other hosts and
	// connect() sockets (docs/outbound.md). Unset: the operator's default (the cluster's
	// Service and Pod CIDRs and the public internet), within what the cluster admin allows.
	// +optional
	Outbound *OutboundSpec `json:"outbound,omitempty"`

	// deployment says which of the Worker's versions serve its requests, and what share
	// of them each serves: a gradual deployment when it names two (docs/versions.md,
	// https://developers.cloudflare.com/workers/configuration/versions-and-deployments/gradual-deployments/).
	// Unset: the version of this spec serves every request, as soon as it is rolled out.
	// +optional
	Deployment *WorkerDeployment `json:"deployment,omitempty"`
}

// WorkerDeployment is the versions serving a Worker and their shares.
type WorkerDeployment struct {
	// versions are one version at 100 percent, or two whose percentages add up to 100.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:XValidation:rule="self.map(v, v.percentage).sum() == 100",message="the percentages must add up to 100"
	// +kubebuilder:validation:XValidation:rule="size(self) < 2 || self[0].versionId != self[1].versionId",message="a version may be listed once"
	// +listType=atomic
	// +required
	Versions []DeploymentVersion `json:"versions"`
}

// DeploymentVersion is one version of a deployment and its share of the requests.
type DeploymentVersion struct {
	// versionId is a version's id from status.versions, or "latest": the version of
	// this spec.
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{16}|latest)$`
	// +required
	VersionID string `json:"versionId"`
	// percentage of the requests this version serves, 0 to 100. A version at 0 serves
	// only the requests that name it in Cloudflare-Workers-Version-Overrides (a smoke
	// test, https://developers.cloudflare.com/workers/versions-and-deployments/version-overrides/).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +required
	Percentage int32 `json:"percentage"`
}

// OutboundSpec is the allow and deny lists of the Worker's network, as workerd's network
// service takes them: CIDRs ("10.96.0.0/12", an address alone is one host) and the tokens
// public, private and local. A connection is allowed when its address matches an allow
// entry and no deny entry.
type OutboundSpec struct {
	// allow lists where the Worker may connect; each entry must be within what the
	// cluster admin allows. Empty or unset: the operator's default.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^(public|private|local|[0-9a-fA-F.:]+(/[0-9]{1,3})?)$`
	// +listType=set
	// +optional
	Allow []string `json:"allow,omitempty"`

	// deny lists where the Worker may not connect, even if allow matches. The cluster
	// admin's deny list always applies besides it.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^(public|private|local|[0-9a-fA-F.:]+(/[0-9]{1,3})?)$`
	// +listType=set
	// +optional
	Deny []string `json:"deny,omitempty"`
}

// WorkerSource is where the Worker's modules come from. Exactly one field is set (none
// only when the whole source is left out).
// +kubebuilder:validation:XValidation:rule="[has(self.inline), has(self.configMap), has(self.image)].filter(x, x).size() == 1",message="exactly one of inline, configMap or image must be set"
type WorkerSource struct {
	// inline lists the modules in the Worker object itself; the first is the main module.
	// +optional
	Inline *InlineSource `json:"inline,omitempty"`

	// configMap takes every key of a ConfigMap in the same namespace as a module.
	// +optional
	ConfigMap *ConfigMapSource `json:"configMap,omitempty"`

	// image takes the modules from a directory of an OCI image.
	// +optional
	Image *ImageSource `json:"image,omitempty"`
}

// InlineSource holds modules in the Worker object.
type InlineSource struct {
	// modules of the Worker, 1 to 64; the first is the main module (the entry point).
	// The total size is limited by the profile's script-size limit (checked at admission).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +required
	Modules []Module `json:"modules"`
}

// Module is one Worker module.
// +kubebuilder:validation:XValidation:rule="has(self.content) != has(self.contentBase64)",message="exactly one of content or contentBase64 must be set"
// +kubebuilder:validation:XValidation:rule="!(self.type in ['Wasm', 'Data']) || has(self.contentBase64)",message="Wasm and Data modules need contentBase64"
type Module struct {
	// name of the module as imports see it, e.g. "worker.js" or "lib/util.mjs";
	// 1 to 253 characters, no leading "/" and no ".." segment.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_@][A-Za-z0-9_.@/+-]*$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('..')",message="module names may not contain '..'"
	// +required
	Name string `json:"name"`

	// type of the module: ESModule, CommonJS, Text, Data, Wasm or JSON.
	// +required
	Type ModuleType `json:"type"`

	// content is the module's text (UTF-8).
	// +optional
	Content *string `json:"content,omitempty"`

	// contentBase64 is the module's bytes, base64-encoded; required for Wasm and Data.
	// +optional
	ContentBase64 *string `json:"contentBase64,omitempty"`
}

// ConfigMapSource takes modules from a ConfigMap.
type ConfigMapSource struct {
	// name of the ConfigMap, in the Worker's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// main is the key of the entry module.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Main string `json:"main"`

	// moduleTypes overrides the type a key gets from its extension (.js/.mjs ESModule,
	// .cjs CommonJS, .json JSON, .wasm Wasm, other data keys Text, binaryData keys Data).
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=key
	// +optional
	ModuleTypes []ModuleTypeOverride `json:"moduleTypes,omitempty"`
}

// ModuleTypeOverride gives one ConfigMap key a module type.
type ModuleTypeOverride struct {
	// key of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Key string `json:"key"`
	// type of that module.
	// +required
	Type ModuleType `json:"type"`
}

// ImageSource takes the Worker's code from a directory of an OCI image (path). The
// renderer cannot list the image's files, so modules names every module the config
// loads: `workerd-operator import --image REF` packs a wrangler bundle into an image and
// writes this list (docs/deploy.md). Without modules, main alone is loaded as one ES
// module (a single-file bundle, e.g. from `esbuild --bundle --format=esm`). The image is
// mounted read-only as an image volume (the pod's volumes[].image, with path as its
// subPath), so the cluster must support image volumes (the ImageVolume feature).
// +kubebuilder:validation:XValidation:rule="!has(self.modules) || self.modules[0].name == self.main",message="modules[0] must be main (the entry module comes first)"
type ImageSource struct {
	// image reference, e.g. "registry.example.com/team/worker:1.2.3" or one pinned by
	// digest ("...@sha256:...").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Image string `json:"image"`

	// path of the directory inside the image that holds the modules. Default "/".
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	// +optional
	Path string `json:"path,omitempty"`

	// main is the entry module's file name, relative to path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Main string `json:"main"`

	// modules lists every module of the bundle, relative to path, main first; each is a
	// file of that name in the image. Omitted: main alone, as an ES module. At most
	// 4096 entries (a bound of this API, far above what wrangler writes).
	// +kubebuilder:validation:MaxItems=4096
	// +listType=map
	// +listMapKey=name
	// +optional
	Modules []ImageModule `json:"modules,omitempty"`

	// pullPolicy of the image.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`
}

// ImageModule is one module of an image bundle: a file of the image and its type.
type ImageModule struct {
	// name of the module as imports see it and of its file under the image's path;
	// 1 to 253 characters, no leading "/" and no ".." segment.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_@][A-Za-z0-9_.@/+-]*$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('..')",message="module names may not contain '..'"
	// +required
	Name string `json:"name"`

	// type of the module: ESModule, CommonJS, Text, Data, Wasm or JSON.
	// +required
	Type ModuleType `json:"type"`
}

// AssetsHTMLHandling is wrangler's assets.html_handling: how paths map to HTML files.
// +kubebuilder:validation:Enum=auto-trailing-slash;force-trailing-slash;drop-trailing-slash;none
type AssetsHTMLHandling string

// HTML handling modes (https://developers.cloudflare.com/workers/static-assets/routing/advanced/html-handling/).
const (
	HTMLAutoTrailingSlash  AssetsHTMLHandling = "auto-trailing-slash"
	HTMLForceTrailingSlash AssetsHTMLHandling = "force-trailing-slash"
	HTMLDropTrailingSlash  AssetsHTMLHandling = "drop-trailing-slash"
	HTMLNone               AssetsHTMLHandling = "none"
)

// AssetsNotFoundHandling is wrangler's assets.not_found_handling: what a request that
// matches no file gets.
// +kubebuilder:validation:Enum=none;404-page;single-page-application
type AssetsNotFoundHandling string

// Not-found handling modes (https://developers.cloudflare.com/workers/static-assets/routing/).
const (
	NotFoundNone    AssetsNotFoundHandling = "none"
	NotFound404Page AssetsNotFoundHandling = "404-page"
	NotFoundSPA     AssetsNotFoundHandling = "single-page-application"
)

// DefaultAssetsPath is spec.assets.path's default.
const DefaultAssetsPath = "/assets"

// WorkerAssets is a directory of static files served with Cloudflare's semantics
// (https://developers.cloudflare.com/workers/static-assets/): a request that matches a
// file gets the file, others go to the Worker, as run_worker_first, html_handling,
// not_found_handling, _redirects and _headers decide. The directory comes from an OCI
// image, mounted read-only as an image volume (the cluster must support image volumes).
type WorkerAssets struct {
	// image holding the directory, e.g. "registry.example.com/team/site:1". Default:
	// the image of spec.source.image (with its pull policy), so that a bundle image
	// holding both the modules and the assets (`import --image`) is named once.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// path of the directory inside the image. Default "/assets".
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="path may not contain a '..' segment"
	// +kubebuilder:default="/assets"
	// +optional
	Path string `json:"path,omitempty"`

	// pullPolicy of the image.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`

	// binding names the env binding through which the Worker fetches assets
	// (wrangler assets.binding, `env.ASSETS.fetch(request)`); it may not equal a name
	// of spec.bindings.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z_$][A-Za-z0-9_$]*$`
	// +optional
	Binding string `json:"binding,omitempty"`

	// htmlHandling is wrangler's html_handling: auto-trailing-slash (Cloudflare's
	// default), force-trailing-slash, drop-trailing-slash or none.
	// +optional
	HTMLHandling AssetsHTMLHandling `json:"htmlHandling,omitempty"`

	// notFoundHandling is wrangler's not_found_handling: none (Cloudflare's default),
	// 404-page or single-page-application.
	// +optional
	NotFoundHandling AssetsNotFoundHandling `json:"notFoundHandling,omitempty"`

	// runWorkerFirst is wrangler's run_worker_first as route patterns: a request whose
	// path matches one goes to the Worker before any asset; a pattern starting with "!"
	// excludes paths (wrangler's `true` is ["/*"]). At most 100 patterns of at most
	// 100 characters (Wrangler's limits, docs/limits.md). An empty list is refused, as
	// wrangler refuses it: omit the field to serve assets first.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:items:Pattern=`^!?/`
	// +listType=atomic
	// +optional
	RunWorkerFirst []string `json:"runWorkerFirst,omitempty"`

	// headers is the text of a _headers file (the file in the image is not read):
	// at most 100 rules and 2,000 characters a line
	// (https://developers.cloudflare.com/workers/static-assets/headers/, checked at
	// admission).
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	Headers string `json:"headers,omitempty"`

	// redirects is the text of a _redirects file (the file in the image is not read):
	// at most 2,000 static and 100 dynamic rules and 1,000 characters a rule
	// (https://developers.cloudflare.com/workers/static-assets/redirects/, checked at
	// admission).
	// +kubebuilder:validation:MaxLength=524288
	// +optional
	Redirects string `json:"redirects,omitempty"`
}

// WorkerLimits are the platform limits a Worker runs under. Values are checked against
// the profile at admission; see docs/limits.md for each limit's source and how the
// operator enforces it (workerd enforces none of them itself).
type WorkerLimits struct {
	// profile names the limit profile: free, paid or custom. Default: the operator's
	// configured default (paid unless changed).
	// +optional
	Profile LimitProfile `json:"profile,omitempty"`

	// cpuMs is the CPU time per invocation in milliseconds, 1 to 300000 (5 minutes).
	// Cloudflare: 10 ms on Free; 30000 ms default and 300000 ms maximum on Paid
	// (limits.cpu_ms, https://developers.cloudflare.com/workers/platform/limits/).
	// Enforced by the pod's CPU limit, not per request.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300000
	// +kubebuilder:validation:XValidation:rule="self <= 300000",message="must be at most 300000 (the API maximum, for every profile; limit cpu_ms; source: https://developers.cloudflare.com/workers/platform/limits/)"
	// +optional
	CPUMs *int64 `json:"cpuMs,omitempty"`

	// subrequests is the number of subrequests per invocation, 1 to 10000000.
	// Cloudflare: Free 50 external / 1000 internal; Paid default 10000, maximum
	// 10000000 (limits.subrequests, https://developers.cloudflare.com/workers/platform/limits/).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	// +kubebuilder:validation:XValidation:rule="self <= 10000000",message="must be at most 10000000 (the API maximum, for every profile; limit subrequests; source: https://developers.cloudflare.com/workers/platform/limits/)"
	// +optional
	Subrequests *int64 `json:"subrequests,omitempty"`

	// memoryMiB is the memory per isolate in MiB, 16 to 4096; default 128 (Cloudflare's
	// 128 MB per isolate, https://developers.cloudflare.com/workers/platform/limits/).
	// Becomes V8 --max-old-space-size and, with headroom, the workerd container's memory
	// limit. Above 128 needs the custom profile.
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=4096
	// +kubebuilder:validation:XValidation:rule="self <= 4096",message="must be at most 4096 (the API maximum, for every profile; limit memory_mib; source: https://developers.cloudflare.com/workers/platform/limits/)"
	// +optional
	MemoryMiB *int32 `json:"memoryMiB,omitempty"`
}

// RuntimeSpec selects the workerd build.
type RuntimeSpec struct {
	// version of workerd, the npm package version such as "1.20261117.1".
	// Default: the operator's pinned version.
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]{8}\.[0-9]+$`
	// +optional
	Version string `json:"version,omitempty"`

	// image holding that workerd; default: the operator's workerd image for version.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`
}

// PodOverrides are passed through to the pods' template.
type PodOverrides struct {
	// labels added to the pods, at most 64; not the operator's own keys (admission
	// refuses them, docs/pod-contract.md).
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations added to the pods, at most 64.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// nodeSelector of the pods, at most 32 labels.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// tolerations of the pods, at most 64.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// affinity of the pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// topologySpreadConstraints of the pods, at most 16.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// resources of the workerd container. Default: derived from spec.limits.memoryMiB.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// priorityClassName of the pods.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// serviceAccountName of the pods. Default: the namespace's "default" account, with
	// its token not mounted.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// WorkerServiceSpec configures the Worker's Service. Only the http socket is exposed.
type WorkerServiceSpec struct {
	// port of the Service and of workerd's http socket, 1 to 65535. Default 8080.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`
	// type of the Service. Default ClusterIP.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`
	// annotations of the Service, at most 64.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WorkerStatus is what the operator observed of a Worker.
type WorkerStatus struct {
	// observedGeneration is the metadata.generation the status describes; set only after
	// a successful reconcile of that generation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, Progressing, Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// replicas is the number of pods of the current Deployment (for /scale).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// readyReplicas is the number of ready pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// selector is the pods' label selector in string form (for /scale).
	// +optional
	Selector string `json:"selector,omitempty"`
	// version is the content hash of the rendered workerd config and modules; it changes
	// exactly when what the pods run changes.
	// +optional
	Version string `json:"version,omitempty"`
	// versions are the Worker's stored versions, newest first: the last 10 and any
	// still deployed (docs/versions.md).
	// +listType=atomic
	// +optional
	Versions []WorkerVersion `json:"versions,omitempty"`
	// deployment is the versions serving the Worker and their shares, ids resolved.
	// +listType=atomic
	// +optional
	Deployment []DeploymentVersion `json:"deployment,omitempty"`
	// previousDeployment is the deployment before this one: what
	// `workerd-operator rollback` returns to.
	// +listType=atomic
	// +optional
	PreviousDeployment []DeploymentVersion `json:"previousDeployment,omitempty"`
	// url is the in-cluster URL of the Worker's Service.
	// +optional
	URL string `json:"url,omitempty"`
	// lastFailure is the last classified failure of a workerd container: a termination,
	// or a failure its running container logged (docs/failures.md).
	// +optional
	LastFailure *FailureStatus `json:"lastFailure,omitempty"`
}

// WorkerVersion is one stored version of a Worker: its code, bindings and settings,
// everything of the spec but replicas, pod, service and deployment.
type WorkerVersion struct {
	// id is the version's content hash (16 hex characters).
	ID string `json:"id"`
	// created is when the operator stored the version.
	Created metav1.Time `json:"created"`
	// message is the Worker's fleet.workerd-operator.io/version-message annotation when
	// the version was stored (wrangler's --message).
	// +optional
	Message string `json:"message,omitempty"`
}

// Worker is a Cloudflare Workers script served by workerd pods behind a Service.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=wk,categories=workerd
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.readyReplicas`,description="ready pods"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Worker struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the Worker runs.
	// +required
	Spec WorkerSpec `json:"spec"`
	// status is what the operator observed.
	// +optional
	Status WorkerStatus `json:"status,omitempty"`
}

// WorkerList is a list of Workers.
// +kubebuilder:object:root=true
type WorkerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Worker `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Worker{}, &WorkerList{})
}
