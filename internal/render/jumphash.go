package render

import (
	"fmt"
	"hash/fnv"
	"math"
)

// MaxShards is the largest spec.shards of a DurableObjectNamespace (api validation).
const MaxShards = 64

// JumpHash maps a 64-bit key to a bucket in [0, buckets) with Lamping & Veach's jump
// consistent hash ("A Fast, Minimal Memory, Consistent Hash Algorithm", 2014). buckets
// must be ≥ 1. The JavaScript twin is internal/shim/router-common.js.
func JumpHash(key uint64, buckets int32) int32 {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(math.Floor(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1))))
	}
	return int32(b)
}

// ShardFor is the shard (0..shards-1) owning the Durable Object whose id string (64 hex
// characters, DurableObjectId.toString()) is id: JumpHash(FNV-1a-64(UTF-8 id), shards).
// It errors when shards is outside 1..MaxShards (api DurableObjectNamespace.spec.shards).
// The router (internal/shim/router.js) and the gateway compute the same value.
func ShardFor(id string, shards int32) (int32, error) {
	if shards < 1 || shards > MaxShards {
		return 0, fmt.Errorf("spec.shards: %d is outside 1 to %d (api DurableObjectNamespace.spec.shards)", shards, MaxShards)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return JumpHash(h.Sum64(), shards), nil
}
