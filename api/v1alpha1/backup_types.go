package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupSpec ships a store's data continuously to a bucket of an S3-compatible store
// (docs/backup.md): every committed change within about a second, full copies at
// least every snapshotInterval, kept for retention.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.path) || (has(self.path) && self.path == oldSelf.path)",message="path is immutable once set: the backup's history lives under it (docs/backup.md)"
type BackupSpec struct {
	// s3 is the bucket and the Secret of its credentials (the same shape as an
	// R2Bucket's).
	// +required
	S3 S3BucketSource `json:"s3"`
	// path is the key prefix of this store's backup in the bucket, without leading or
	// trailing "/". Default "<namespace>/<kind, lowercase plural>/<name>".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^/].*[^/]$|^[^/]$`
	// +optional
	Path string `json:"path,omitempty"`
	// retention is how far back a restore can go. Default 720h, D1 Time Travel's 30
	// days (https://developers.cloudflare.com/d1/reference/time-travel/); at least 1h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="retention must be at least 1h (docs/backup.md)"
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`
	// snapshotInterval is how often each database gets a full copy at most (deltas of
	// the changed pages in between). Default 1h; at least 1m.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="snapshotInterval must be at least 1m (docs/backup.md)"
	// +optional
	SnapshotInterval *metav1.Duration `json:"snapshotInterval,omitempty"`
}

// RestoreSpec starts a store from a backup: when a pod's volume is empty and the
// store's own backup holds nothing for it (a new store, or its claims deleted), the
// pod is filled from this backup, as it was at pointInTime, before workerd starts
// (docs/backup.md). Object identities derive from the store's namespace and name:
// restore a backup into a store of the same name.
type RestoreSpec struct {
	// s3 is the bucket holding the backup and the Secret of its credentials.
	// +required
	S3 S3BucketSource `json:"s3"`
	// path is the backup's key prefix: the source store's spec.backup.path (or its
	// default "<namespace>/<kind, lowercase plural>/<name>").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^/].*[^/]$|^[^/]$`
	// +required
	Path string `json:"path"`
	// pointInTime restores each database as it was at that instant; absent, the
	// newest state shipped.
	// +optional
	PointInTime *metav1.Time `json:"pointInTime,omitempty"`
}

// BackupStatus is where a store's backup stands, from its pods' sidecars.
type BackupStatus struct {
	// path is the backup's key prefix in the bucket (spec.backup.path or its default).
	// +optional
	Path string `json:"path,omitempty"`
	// databases is how many database files the pods ship.
	// +optional
	Databases int32 `json:"databases,omitempty"`
	// lastShipped: every pod shipped its changes (or found none) at least this
	// recently.
	// +optional
	LastShipped *metav1.Time `json:"lastShipped,omitempty"`
	// lastFull is the newest full copy of any database.
	// +optional
	LastFull *metav1.Time `json:"lastFull,omitempty"`
	// lagSeconds is the age of the oldest change not yet shipped, across the pods.
	// +optional
	LagSeconds int32 `json:"lagSeconds,omitempty"`
	// target is where the pods ship: endpoint, bucket and path. The pod lists below
	// start over when it changes.
	// +optional
	Target string `json:"target,omitempty"`
	// shippedPods are the pods whose sidecar completed a pass to target since it
	// started, so the bucket holds their data: their volumes are moved off a lost or
	// drained node (docs/scaling.md). restoredPods were filled from target when they
	// started and have not completed a pass yet: their volumes are moved off a lost
	// node only (a drained node still has the newest data). A pod stays listed while
	// it is down, and while it is absent if its StatefulSet keeps its ordinal (deleted
	// with a lost node, not yet made again); it leaves the lists when it answers
	// otherwise or a reshard removes its ordinal.
	// +optional
	// +listType=set
	ShippedPods []string `json:"shippedPods,omitempty"`
	// +optional
	// +listType=set
	RestoredPods []string `json:"restoredPods,omitempty"`
}
