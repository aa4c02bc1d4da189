package v1alpha1

// ContainerSpec runs a container per object of a Durable Object class that extends
// Container (@cloudflare/containers, https://developers.cloudflare.com/containers/): the
// object starts, addresses and stops it through ctx.container, and the operator runs
// each instance as a Pod that only the object's shard reaches (docs/containers.md).
type ContainerSpec struct {
	// image is the container image every instance runs: an OCI reference the nodes can
	// pull (wrangler's containers[].image once built and pushed).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Image string `json:"image"`

	// maxInstances caps the instances running at once across the namespace's shards
	// (wrangler max_instances), 1 to 1000. Default 20. A start beyond it fails, as on
	// Cloudflare.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxInstances *int32 `json:"maxInstances,omitempty"`

	// instanceType is one of Cloudflare's instance types, which set each instance's CPU
	// and memory limits; it requests an eighth of the CPU and a quarter of the memory, as
	// instances mostly sleep
	// (https://developers.cloudflare.com/containers/platform/limits/): lite
	// (1/16 vCPU, 256 MiB), basic (1/4, 1 GiB), standard-1 (1/2, 4 GiB), standard-2
	// (1, 6 GiB), standard-3 (2, 8 GiB), standard-4 (4, 12 GiB). Default lite.
	// +kubebuilder:validation:Enum=lite;basic;standard-1;standard-2;standard-3;standard-4
	// +optional
	InstanceType string `json:"instanceType,omitempty"`
}
