package podcontract

// WorkerdMemoryMiB is the memory limit of a workerd container whose V8 heap limit
// (--max-old-space-size) is heapMiB: the heap plus WorkerdOverheadMiB for what workerd
// holds beside the Worker's heap, so V8 reports "Reached heap limit" before the kernel
// OOM-kills the container. The pod builders derive the container's memory from it, and
// admission caps spec.pod.resources with it.
func WorkerdMemoryMiB(heapMiB int64) int64 {
	return heapMiB + WorkerdOverheadMiB
}

// WorkerdOverheadMiB is workerd's resident memory beside the Worker's heap under
// sustained load: V8's other spaces, the shim isolates (ingress, tail, health; router
// and gateway on shards), each with a heap of its own, and the allocator's caches.
// Measured with the pinned workerd and --max-semi-space-size=1: a sample pod's workerd
// at 128 MiB of heap, called flat out, held up to 344 MB resident (216 MiB beside the
// heap); a 192 MiB container at that heap is passed within seconds of such load.
const WorkerdOverheadMiB = 256
