package podcontract

// WorkerdMemoryMiB is the memory limit of a workerd container whose V8 heap limit
// (--max-old-space-size) is heapMiB: the heap plus headroom (half the heap, at least
// 64 MiB) for V8's other spaces and workerd itself, so V8 reports "Reached heap limit"
// before the kernel OOM-kills the container. The pod builders derive the container's
// memory from it, and admission caps spec.pod.resources with it.
func WorkerdMemoryMiB(heapMiB int64) int64 {
	return heapMiB + max(heapMiB/2, 64)
}
