package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DurableObjectNamespaceSpec hosts one Durable Object class of a Worker on a
// StatefulSet of shards; every object id lives on exactly one shard
// (jumpHash(id, shards)).
// +kubebuilder:validation:XValidation:rule="(has(self.shards) ? self.shards : 1) == (has(oldSelf.shards) ? oldSelf.shards : 1) || (has(self.backup) && has(oldSelf.backup))",message="shards: a change moves objects between shards through the namespace's backup, which the running shards must already ship; set spec.backup first, then change shards (docs/scaling.md)"
type DurableObjectNamespaceSpec struct {
	// workerRef names the Worker whose code defines the class. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workerRef is immutable: the objects' storage belongs to this Worker's class"
	// +required
	WorkerRef LocalObjectReference `json:"workerRef"`

	// className is the exported Durable Object class, a JavaScript identifier. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_$][A-Za-z0-9_$]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="className is immutable: object ids and storage are derived from it"
	// +required
	ClassName string `json:"className"`

	// sql exposes ctx.storage.sql (workerd enableSql). Storage is SQLite either way.
	// +optional
	SQL bool `json:"sql,omitempty"`

	// shards is the number of pods the objects are spread over, 1 to 64. Default 1.
	// A change moves the objects whose shard changes (jumpHash) through the
	// namespace's backup, so it needs spec.backup (docs/scaling.md).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Shards *int32 `json:"shards,omitempty"`

	// storage is the persistent volume of each shard (workerd localDisk).
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`
	// backup ships the data continuously to an S3-compatible bucket (docs/backup.md).
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`
	// restore starts the store from a backup when its volume is empty (docs/backup.md).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="restore is immutable: it applies to the store's first start (docs/backup.md)"
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`

	// preventEviction keeps objects in memory (workerd evicts idle objects after 10 s).
	// +optional
	PreventEviction bool `json:"preventEviction,omitempty"`

	// channels enables durable channels (contract 0.1.0, docs/channels.md) for the objects.
	// +optional
	Channels *ChannelsSpec `json:"channels,omitempty"`

	// container runs a container per object: the class extends Container
	// (@cloudflare/containers) and wrangler's containers[] names it (docs/containers.md).
	// +optional
	Container *ContainerSpec `json:"container,omitempty"`
}

// ChannelsSpec configures durable channels. Limits may be lowered below the profile's
// (64 channels per object, 256 subscribers per channel, 64 KiB per message, 1 MiB
// backlog per subscriber; docs/channels.md), never raised above them.
type ChannelsSpec struct {
	// enabled turns channels on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// binding is the env name under which Durable Object code finds the channels client.
	// Default "CHANNELS".
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z_$][A-Za-z0-9_$]*$`
	// +optional
	Binding string `json:"binding,omitempty"`

	// maxChannels per object instance, 1 to 64.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +kubebuilder:validation:XValidation:rule="self <= 64",message="must be at most 64 (the API maximum, for every profile; limit channels_per_object; source: docs/channels.md)"
	// +optional
	MaxChannels *int32 `json:"maxChannels,omitempty"`

	// maxSubscribers per channel, 1 to 256.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +kubebuilder:validation:XValidation:rule="self <= 256",message="must be at most 256 (the API maximum, for every profile; limit subscribers_per_channel; source: docs/channels.md)"
	// +optional
	MaxSubscribers *int32 `json:"maxSubscribers,omitempty"`

	// maxMessageBytes per message, 1 to 65536 bytes (64 KiB).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:validation:XValidation:rule="self <= 65536",message="must be at most 65536 (the API maximum, for every profile; limit channel_message_bytes; source: docs/channels.md)"
	// +optional
	MaxMessageBytes *int32 `json:"maxMessageBytes,omitempty"`

	// maxBacklogBytes per subscriber, 1024 to 1048576 bytes (1 MiB); over it
	// the subscriber is disconnected.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=1048576
	// +kubebuilder:validation:XValidation:rule="self <= 1048576",message="must be at most 1048576 (the API maximum, for every profile; limit channel_backlog_bytes; source: docs/channels.md)"
	// +optional
	MaxBacklogBytes *int32 `json:"maxBacklogBytes,omitempty"`
}

// DurableObjectNamespaceStatus is what the operator observed.
type DurableObjectNamespaceStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, Progressing, Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// shards is the number of shard pods that exist.
	// +optional
	Shards int32 `json:"shards,omitempty"`
	// readyShards is the number of shard pods that are ready.
	// +optional
	ReadyShards int32 `json:"readyShards,omitempty"`
	// servedShards is the shard count the namespace last served with every shard ready:
	// callers route by it (a change of spec.shards reaches them once it is done).
	// +optional
	ServedShards int32 `json:"servedShards,omitempty"`
	// uniqueKey is the workerd uniqueKey of the namespace: object ids derive from it and
	// it names the storage directory. "<namespace>-<name>", so a namespace re-created
	// under the same name finds retained data; once set it is never changed.
	// +optional
	UniqueKey string `json:"uniqueKey,omitempty"`
	// lastFailure is the last classified failure of a shard container.
	// +optional
	LastFailure *FailureStatus `json:"lastFailure,omitempty"`
	// backup is where the store's backup stands (spec.backup).
	// +optional
	Backup *BackupStatus `json:"backup,omitempty"`
	// resharding is the change of spec.shards under way (docs/scaling.md).
	// +optional
	Resharding *ReshardStatus `json:"resharding,omitempty"`
	// lastReshard is the last change of the shard count that finished.
	// +optional
	LastReshard *ReshardStatus `json:"lastReshard,omitempty"`
}

// ReshardPhase is where a change of the shard count stands.
// +kubebuilder:validation:Enum=Stopping;Starting
type ReshardPhase string

const (
	// ReshardStopping: the old shard set stops; each pod ships its last changes to
	// the backup and seals. Calls wait for their object's owner meanwhile.
	ReshardStopping ReshardPhase = "Stopping"
	// ReshardStarting: the new shard set starts; each pod first takes the objects it
	// now owns from the backup and hands over those it no longer owns.
	ReshardStarting ReshardPhase = "Starting"
)

// ReshardStatus describes a change of the shard count.
type ReshardStatus struct {
	// from is the shard count objects move from, to the one they move to.
	From int32 `json:"from"`
	To   int32 `json:"to"`
	// phase is set while the change is under way.
	// +optional
	Phase ReshardPhase `json:"phase,omitempty"`
	// startedAt is when the old shard set began to stop.
	StartedAt metav1.Time `json:"startedAt"`
	// stoppedAt is when no pod of the old shard set was left (the new set starts).
	// +optional
	StoppedAt *metav1.Time `json:"stoppedAt,omitempty"`
	// backup is spec.backup when the change began: the objects move through it even
	// if spec.backup changes meanwhile.
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`
	// finishedAt is when every shard of the new set was ready.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// DurableObjectNamespace is one Durable Object class of a Worker, sharded over pods.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dons,categories=workerd
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Worker",type=string,JSONPath=`.spec.workerRef.name`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.className`
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.status.readyShards`,description="ready shards"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DurableObjectNamespace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired namespace.
	// +required
	Spec DurableObjectNamespaceSpec `json:"spec"`
	// status is what the operator observed.
	// +optional
	Status DurableObjectNamespaceStatus `json:"status,omitempty"`
}

// DurableObjectNamespaceList is a list of DurableObjectNamespaces.
// +kubebuilder:object:root=true
type DurableObjectNamespaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DurableObjectNamespace `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DurableObjectNamespace{}, &DurableObjectNamespaceList{})
}
