package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultContainerMaxInstances is maxInstances when unset.
const DefaultContainerMaxInstances int32 = 20

// DefaultContainerInstanceType is instanceType when unset.
const DefaultContainerInstanceType = "lite"

// containerInstanceTypes are Cloudflare's predefined instance types: vCPU (in
// millicores) and memory, https://developers.cloudflare.com/containers/platform/limits/.
var containerInstanceTypes = map[string]struct{ cpu, memory string }{
	"lite":       {"62m", "256Mi"},
	"basic":      {"250m", "1Gi"},
	"standard-1": {"500m", "4Gi"},
	"standard-2": {"1", "6Gi"},
	"standard-3": {"2", "8Gi"},
	"standard-4": {"4", "12Gi"},
}

// MaxInstancesOrDefault is spec.maxInstances, or DefaultContainerMaxInstances.
func (c *ContainerSpec) MaxInstancesOrDefault() int32 {
	if c.MaxInstances == nil {
		return DefaultContainerMaxInstances
	}
	return *c.MaxInstances
}

// InstanceTypeOrDefault is spec.instanceType, or DefaultContainerInstanceType.
func (c *ContainerSpec) InstanceTypeOrDefault() string {
	if c.InstanceType == "" {
		return DefaultContainerInstanceType
	}
	return c.InstanceType
}

// An instance requests part of its instance type's CPU and memory and may burst to the
// whole type, its limit: instances sleep most of their lives (sleepAfter) and are idle
// between requests while awake, so the node reserves an eighth of the CPU and a quarter
// of the memory (memory is not given back while the process lives).
const (
	containerCPURequestShare    = 8
	containerMemoryRequestShare = 4
)

// Resources are an instance's limits, its instance type's CPU and memory, and its
// requests, the shares above of them.
func (c *ContainerSpec) Resources() corev1.ResourceRequirements {
	t, ok := containerInstanceTypes[c.InstanceTypeOrDefault()]
	if !ok {
		t = containerInstanceTypes[DefaultContainerInstanceType]
	}
	cpu, mem := resource.MustParse(t.cpu), resource.MustParse(t.memory)
	return corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu.MilliValue()/containerCPURequestShare, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem.Value()/containerMemoryRequestShare, resource.BinarySI),
		},
	}
}

// IsContainerInstanceType reports whether s names one of Cloudflare's instance types.
func IsContainerInstanceType(s string) bool {
	_, ok := containerInstanceTypes[s]
	return ok
}
