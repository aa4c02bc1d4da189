package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Data stores (docs/kv.md, docs/d1.md, docs/queues.md): a KVNamespace, D1Database or
// Queue is hosted by Durable Objects of workerd's built-in Workers (/workerd/kv.js,
// /workerd/d1.js, /workerd/queues.js) on a one-pod StatefulSet with a PVC; Workers
// reach it over the namespace's internal mutual TLS.

// DataStoreStatus is what the operator observed of a data store's host pod.
type DataStoreStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, Progressing, Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// readyShards is 1 when the host pod is ready.
	// +optional
	ReadyShards int32 `json:"readyShards,omitempty"`
	// lastFailure is the last failure of the host pod (failure.ClassifyPods).
	// +optional
	LastFailure *FailureStatus `json:"lastFailure,omitempty"`
	// backup is where the store's backup stands (spec.backup).
	// +optional
	Backup *BackupStatus `json:"backup,omitempty"`
}

// KVNamespaceSpec is a Workers KV namespace.
type KVNamespaceSpec struct {
	// storage of the host pod's PVC (entries and large values).
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`
	// backup ships the data continuously to an S3-compatible bucket (docs/backup.md).
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`
	// restore starts the store from a backup when its volume is empty (docs/backup.md).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="restore is immutable: it applies to the store's first start (docs/backup.md)"
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
}

// KVNamespace is a Workers KV namespace (https://developers.cloudflare.com/kv/api/),
// bound by a Worker as `kvNamespace: {name}`.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kv,categories=workerd
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KVNamespace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired namespace.
	// +optional
	Spec KVNamespaceSpec `json:"spec,omitempty"`
	// status is what the operator observed.
	// +optional
	Status DataStoreStatus `json:"status,omitempty"`
}

// KVNamespaceList is a list of KVNamespaces.
// +kubebuilder:object:root=true
type KVNamespaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KVNamespace `json:"items"`
}

// D1DatabaseSpec is a D1 database.
type D1DatabaseSpec struct {
	// storage of the host pod's PVC (the SQLite database).
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`
	// backup ships the data continuously to an S3-compatible bucket (docs/backup.md).
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`
	// restore starts the store from a backup when its volume is empty (docs/backup.md).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="restore is immutable: it applies to the store's first start (docs/backup.md)"
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
	// migrations applies `wrangler d1 migrations` files from a ConfigMap.
	// +optional
	Migrations *D1Migrations `json:"migrations,omitempty"`
}

// D1Migrations are wrangler-layout migration files (0001_name.sql, ...) in a ConfigMap,
// applied in name order before the database serves a query, each recorded in the
// migrations table as `wrangler d1 migrations apply` records it.
type D1Migrations struct {
	// configMap holds the files, one key each (keys ending in .sql; others are ignored).
	// +required
	ConfigMap LocalObjectReference `json:"configMap"`
	// table records the applied migrations; default d1_migrations (wrangler's
	// migrations_table default,
	// https://developers.cloudflare.com/workers/wrangler/configuration/#d1-databases).
	// +kubebuilder:default=d1_migrations
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +optional
	Table string `json:"table,omitempty"`
}

// D1DatabaseStatus is what the operator observed of a D1Database.
type D1DatabaseStatus struct {
	DataStoreStatus `json:",inline"`
	// lastMigration is the last migration file of spec.migrations, applied once the
	// host pod running it is ready (the pod applies them before it reports ready).
	// +optional
	LastMigration string `json:"lastMigration,omitempty"`
}

// D1Database is a D1 database (https://developers.cloudflare.com/d1/worker-api/),
// bound by a Worker as `d1Database: {name}`.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=d1,categories=workerd
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Migration",type=string,JSONPath=`.status.lastMigration`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type D1Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired database.
	// +optional
	Spec D1DatabaseSpec `json:"spec,omitempty"`
	// status is what the operator observed.
	// +optional
	Status D1DatabaseStatus `json:"status,omitempty"`
}

// D1DatabaseList is a list of D1Databases.
// +kubebuilder:object:root=true
type D1DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []D1Database `json:"items"`
}

// QueueSpec is a Cloudflare Queue.
type QueueSpec struct {
	// storage of the host pod's PVC (the messages).
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`
	// backup ships the data continuously to an S3-compatible bucket (docs/backup.md).
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`
	// restore starts the store from a backup when its volume is empty (docs/backup.md).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="restore is immutable: it applies to the store's first start (docs/backup.md)"
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
	// consumers receive the queue's batches in their queue() handler. Cloudflare allows
	// one active consumer per queue
	// (https://developers.cloudflare.com/queues/platform/limits/).
	// +kubebuilder:validation:MaxItems=1
	// +listType=atomic
	// +optional
	Consumers []QueueConsumer `json:"consumers,omitempty"`
}

// QueueConsumer is a Worker receiving a queue's batches, with Cloudflare's consumer
// settings (https://developers.cloudflare.com/queues/configuration/configure-queues/).
type QueueConsumer struct {
	// worker is the consuming Worker, in the same namespace. Its code runs in the
	// Queue's pod, where queues.js calls its queue() handler (docs/queues.md).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Worker string `json:"worker"`
	// maxBatchSize is the most messages in a batch, 1 to 100; default 10.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxBatchSize *int32 `json:"maxBatchSize,omitempty"`
	// maxBatchTimeout is how long a batch waits to fill, in seconds, 0 to 60; default 5.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=60
	// +optional
	MaxBatchTimeout *int32 `json:"maxBatchTimeout,omitempty"`
	// maxRetries is how often a message is retried, 0 to 100; default 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxRetries *int32 `json:"maxRetries,omitempty"`
	// retryDelay is the delay before a retried message is delivered again, in seconds,
	// 0 to 43200 (12 hours); default 0.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=43200
	// +optional
	RetryDelay *int32 `json:"retryDelay,omitempty"`
	// deadLetterQueue receives messages that used up maxRetries; they are kept on this
	// Queue's host under that queue name and delivered to the consumer of the Queue of
	// that name when it is the same Worker (docs/queues.md).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	DeadLetterQueue string `json:"deadLetterQueue,omitempty"`
	// maxConcurrency bounds concurrent batches, 1 to 250; default: no bound.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=250
	// +optional
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`
}

// Queue is a Cloudflare Queue
// (https://developers.cloudflare.com/queues/configuration/javascript-apis/), bound by
// a producer Worker as `queue: {name}`.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=q,categories=workerd
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.consumers) || self.spec.consumers.all(c, !has(c.deadLetterQueue) || c.deadLetterQueue != self.metadata.name)",message="deadLetterQueue may not be the queue itself",fieldPath=".spec.consumers"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumers[0].worker`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired queue.
	// +optional
	Spec QueueSpec `json:"spec,omitempty"`
	// status is what the operator observed.
	// +optional
	Status DataStoreStatus `json:"status,omitempty"`
}

// QueueList is a list of Queues.
// +kubebuilder:object:root=true
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KVNamespace{}, &KVNamespaceList{}, &D1Database{}, &D1DatabaseList{}, &Queue{}, &QueueList{})
}
