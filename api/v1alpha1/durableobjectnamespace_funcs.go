package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ShardSetShards is the shard count the namespace's StatefulSet is built for: the
// target of a change under way, else spec.shards (default 1).
func (d *DurableObjectNamespace) ShardSetShards() int32 {
	if r := d.Status.Resharding; r != nil {
		return r.To
	}
	return d.SpecShards()
}

// RoutingShards is the shard count callers outside the shard set route by: the
// count being left while a change is under way (callers learn the new one from the
// new set's gateways, docs/scaling.md), else the count last served, else
// spec.shards (a new namespace). So a change of spec.shards does not roll the
// callers' pods before or while the shards are stopped.
func (d *DurableObjectNamespace) RoutingShards() int32 {
	if r := d.Status.Resharding; r != nil {
		return r.From
	}
	if d.Status.ServedShards > 0 {
		return d.Status.ServedShards
	}
	return d.SpecShards()
}

// SpecShards is spec.shards, default 1.
func (d *DurableObjectNamespace) SpecShards() int32 {
	if d.Spec.Shards != nil {
		return *d.Spec.Shards
	}
	return 1
}

// LatestReshard is the change of the shard count under way, else the last one that
// finished; nil when the count never changed.
func (d *DurableObjectNamespace) LatestReshard() *ReshardStatus {
	if d.Status.Resharding != nil {
		return d.Status.Resharding
	}
	return d.Status.LastReshard
}

// ShardSetReplicas is the StatefulSet's replica count: none while the old shard set
// stops during a change of the shard count, else ShardSetShards.
func (d *DurableObjectNamespace) ShardSetReplicas() int32 {
	if r := d.Status.Resharding; r != nil && r.Phase == ReshardStopping {
		return 0
	}
	return d.ShardSetShards()
}

// AnnotationUnsealedShards on a DurableObjectNamespace lists shards of the old set
// ("1,3") whose seal a change of the shard count stops waiting for: their pods ended
// without shipping their last changes (a lost node), and the objects they owned move
// as of their last shipped state, losing the writes after it (docs/scaling.md).
const AnnotationUnsealedShards = "fleet.workerd-operator.io/unsealed-shards"

// UnsealedShards parses AnnotationUnsealedShards: the ordinals below from, sorted;
// an entry that is not such an ordinal is an error naming it.
func (d *DurableObjectNamespace) UnsealedShards(from int32) ([]int32, error) {
	v := strings.TrimSpace(d.Annotations[AnnotationUnsealedShards])
	if v == "" {
		return nil, nil
	}
	var out []int32
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 || int32(n) >= from {
			return nil, fmt.Errorf("annotation %s: %q is not a shard of the old set (0 to %d)", AnnotationUnsealedShards, f, from-1)
		}
		out = append(out, int32(n))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
