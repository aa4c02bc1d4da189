package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// R2BucketSpec is where an R2 bucket's objects live: a bucket of an S3-compatible store
// (docs/r2.md). Workers bind it with an r2Bucket binding.
type R2BucketSpec struct {
	// s3 is the S3-compatible bucket that stores the objects.
	// +required
	S3 S3BucketSource `json:"s3"`
}

// S3BucketSource is a bucket of an S3-compatible store and the Secret holding the
// credentials for it.
type S3BucketSource struct {
	// endpoint is the store's URL: http:// or https://, host and optional port, no path
	// (e.g. https://s3.eu-central-1.amazonaws.com, http://versitygw.storage:7070).
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/?#]+/?$`
	// +required
	Endpoint string `json:"endpoint"`

	// bucket is the S3 bucket's name (3 to 63 characters, S3 bucket naming rules).
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	// +required
	Bucket string `json:"bucket"`

	// region is the S3 region the requests are signed for. Default: us-east-1.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Region string `json:"region,omitempty"`

	// credentialsSecret names a Secret of the namespace with the keys
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. They reach the pods' sidecars as
	// environment variables only, never through a ConfigMap.
	// +required
	CredentialsSecret LocalObjectReference `json:"credentialsSecret"`
}

// Keys of an R2Bucket's credentials Secret.
const (
	R2AccessKeyIDKey     = "AWS_ACCESS_KEY_ID"
	R2SecretAccessKeyKey = "AWS_SECRET_ACCESS_KEY"
)

// R2BucketStatus is what the operator observed.
type R2BucketStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready is True when the credentials Secret exists and holds both keys
	// (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, known from its metadata; the values
	// are never read), else False with reason SecretNotFound naming what is missing. The
	// operator does not contact the store: a wrong endpoint, bucket or credential shows
	// in the Worker's R2 calls and its sidecar's log.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// R2Bucket is a Cloudflare R2 bucket kept in an S3-compatible store.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=r2,categories=workerd
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.s3.endpoint`
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.s3.bucket`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type R2Bucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired bucket.
	// +required
	Spec R2BucketSpec `json:"spec"`
	// status is what the operator observed.
	// +optional
	Status R2BucketStatus `json:"status,omitempty"`
}

// R2BucketList is a list of R2Buckets.
// +kubebuilder:object:root=true
type R2BucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []R2Bucket `json:"items"`
}

func init() {
	SchemeBuilder.Register(&R2Bucket{}, &R2BucketList{})
}
