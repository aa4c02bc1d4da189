package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// Binding is one entry of the Worker's env. Exactly one value field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.text), has(self.json), has(self.secretKeyRef), has(self.service), has(self.durableObjectNamespace), has(self.workflow), has(self.kvNamespace), has(self.d1Database), has(self.queue), has(self.hyperdrive), has(self.r2Bucket), has(self.ai), has(self.dispatchNamespace)].filter(x, x).size() == 1",message="exactly one of text, json, secretKeyRef, service, durableObjectNamespace, workflow, kvNamespace, d1Database, queue, hyperdrive, r2Bucket, ai or dispatchNamespace must be set"
type Binding struct {
	// name of the binding in env: a JavaScript identifier, 1 to 64 characters.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z_$][A-Za-z0-9_$]*$`
	// +required
	Name string `json:"name"`

	// text is a plain string value (Cloudflare "vars"); lands in the rendered config.
	// At most 5 KB (Cloudflare's per-variable limit, checked at admission).
	// +optional
	Text *string `json:"text,omitempty"`

	// json is a JSON document given as text; env gets the parsed value.
	// +optional
	JSON *string `json:"json,omitempty"`

	// secretKeyRef reads the value from a Secret key. It reaches workerd as an
	// environment variable and a fromEnvironment binding: never through a ConfigMap.
	// +optional
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef,omitempty"`

	// service binds another Worker of the same namespace (fetch and JS RPC).
	// +optional
	Service *ServiceBinding `json:"service,omitempty"`

	// durableObjectNamespace binds a DurableObjectNamespace of the same namespace.
	// +optional
	DurableObjectNamespace *LocalObjectReference `json:"durableObjectNamespace,omitempty"`

	// workflow binds a Workflow of the same namespace.
	// +optional
	Workflow *LocalObjectReference `json:"workflow,omitempty"`

	// kvNamespace binds a KVNamespace of the same namespace (docs/kv.md).
	// +optional
	KVNamespace *LocalObjectReference `json:"kvNamespace,omitempty"`

	// d1Database binds a D1Database of the same namespace (docs/d1.md).
	// +optional
	D1Database *LocalObjectReference `json:"d1Database,omitempty"`

	// queue binds a Queue of the same namespace as a producer (docs/queues.md).
	// +optional
	Queue *QueueBinding `json:"queue,omitempty"`
	// r2Bucket binds an R2Bucket of the same namespace (docs/r2.md).
	// +optional
	R2Bucket *LocalObjectReference `json:"r2Bucket,omitempty"`

	// hyperdrive binds a PostgreSQL or MySQL database as Cloudflare Hyperdrive does
	// (env.X.connectionString, host, port, user, password, database), without
	// Hyperdrive's pooling and caching (docs/outbound.md).
	// +optional
	Hyperdrive *HyperdriveBinding `json:"hyperdrive,omitempty"`

	// ai binds an OpenAI-compatible inference server (vLLM, llama.cpp's server, Ollama)
	// as Workers AI: env.X.run(model, inputs) for text generation, chat and embeddings,
	// in Cloudflare's request and response shapes (docs/ai.md).
	// +optional
	AI *AIBinding `json:"ai,omitempty"`

	// dispatchNamespace binds a dispatch namespace (Workers for Platforms): the Workers
	// of this namespace whose spec.dispatchNamespace names it, reached by name through
	// env.X.get(name).fetch(...) (docs/dispatch.md).
	// +optional
	DispatchNamespace *DispatchNamespaceBinding `json:"dispatchNamespace,omitempty"`
}

// DispatchNamespaceBinding names the dispatch namespace a dispatch binding reaches.
type DispatchNamespaceBinding struct {
	// namespace is the dispatch namespace's name, as user Workers name it in
	// spec.dispatchNamespace (wrangler's dispatch_namespaces[].namespace).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters (docs/dispatch.md)"
	// +required
	Namespace string `json:"namespace"`

	// maxSharedWorkers is how many Shared user Workers (spec.dispatchPlacement) of the
	// dispatch namespace each of this Worker's pods loads at most; a call to one more is
	// answered 503. Each pod's workerd container gets SharedWorkerMiB more memory for
	// each (docs/dispatch.md). Default 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5000
	// +optional
	MaxShared *int32 `json:"maxSharedWorkers,omitempty"`
}

// AIBinding names the inference server behind a Workers AI binding and maps
// Cloudflare's model names to the server's. The server's address and key reach only
// the pod's sidecar, as env from the Secret; its connections obey spec.outbound.
type AIBinding struct {
	// secretRef names a Secret of the Worker's namespace with the key url, the server's
	// OpenAI-compatible base URL (e.g. http://llama.models.svc:8080/v1), and optionally
	// apiKey (sent as a bearer token) and models (a JSON object mapping Cloudflare model
	// names to the server's, shared by every Worker that names the Secret).
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`

	// models maps Cloudflare model names to the server's; an entry here wins over the
	// Secret's entry of the same name. The name "*" maps every model not named.
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	// +optional
	Models []AIModel `json:"models,omitempty"`
}

// AIModel maps one Cloudflare model name to a model of the inference server.
type AIModel struct {
	// name is the model name the Worker passes to run(), e.g.
	// "@cf/meta/llama-3.1-8b-instruct", or "*" for every model not named.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Name string `json:"name"`
	// model is the server's name for it (the "model" field of its requests).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Model string `json:"model"`
	// url is the base URL of another OpenAI-compatible server that serves this model
	// (e.g. an embeddings server); default: the Secret's url. The Secret's apiKey is not
	// sent to it (only to urls the Secret itself names).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	URL string `json:"url,omitempty"`
}

// Keys of an ai binding's Secret (AIBinding.SecretRef).
const (
	AIURLKey    = "url"
	AIAPIKeyKey = "apiKey"
	AIModelsKey = "models"
)

// QueueBinding is a producer's binding to a Queue of the same namespace: wrangler's
// queues.producers entry (https://developers.cloudflare.com/queues/configuration/configure-queues/).
type QueueBinding struct {
	// name of the Queue, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// deliveryDelay delays each message this Worker sends by that many seconds, unless
	// the send, the batch or the message sets delaySeconds (wrangler's delivery_delay,
	// 0 to 43200 as on Cloudflare). Default: no delay.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=43200
	// +optional
	DeliveryDelay *int32 `json:"deliveryDelay,omitempty"`
}

// HyperdriveBinding names the Secret that holds the database's address and
// credentials. They reach workerd as files of the Secret mounted into the pod and as
// environment variables, never through a ConfigMap.
type HyperdriveBinding struct {
	// secretRef names a Secret of the Worker's namespace with the keys host, port,
	// database, user, password and scheme ("postgres" or "mysql"); all six are required.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// TailConsumer names a Worker that receives another Worker's tail events.
type TailConsumer struct {
	// service is the name of the tail Worker, in the same namespace; not the Worker
	// itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Service string `json:"service"`
}

// ServiceBinding names another Worker and optionally one of its named entrypoints.
type ServiceBinding struct {
	// name of the target Worker, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// entrypoint is a named WorkerEntrypoint export of the target; empty means default.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_$][A-Za-z0-9_$]*$`
	// +optional
	Entrypoint string `json:"entrypoint,omitempty"`
}
