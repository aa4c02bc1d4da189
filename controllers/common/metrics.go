package common

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Series names of the stores' shards on the manager's /metrics (docs/alerts.md).
const (
	ShardsDesired = "workerd_operator_shards_desired"
	ShardsReady   = "workerd_operator_shards_ready"
)

var (
	shardLabels      = []string{"namespace", "kind", "name"}
	shardsDesiredDsc = prometheus.NewDesc(ShardsDesired, "Shard pods a store wants: a DurableObjectNamespace's shards (the target of a change under way), 1 for a KV, D1 or Queue host and a Workflow engine.", shardLabels, nil)
	shardsReadyDsc   = prometheus.NewDesc(ShardsReady, "Shard pods of a store that are ready (status.readyShards).", shardLabels, nil)
)

// ShardsCollector reports every store's desired and ready shards from the objects'
// status in the manager's cache when scraped, so a deleted object's series go with it.
type ShardsCollector struct {
	Reader client.Reader
}

// shardsScrapeTimeout bounds one scrape's lists.
const shardsScrapeTimeout = 5 * time.Second

// RegisterShardsCollector adds a ShardsCollector reading r to the manager's registry,
// replacing the one an earlier manager of this process registered.
func RegisterShardsCollector(r client.Reader) error {
	ctrlmetrics.Registry.Unregister(&ShardsCollector{})
	return ctrlmetrics.Registry.Register(&ShardsCollector{Reader: r})
}

func (c *ShardsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shardsDesiredDsc
	ch <- shardsReadyDsc
}

// shardCount is one store's line.
type shardCount struct {
	kind, namespace, name string
	desired, ready        int32
}

func (c *ShardsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), shardsScrapeTimeout)
	defer cancel()
	for _, s := range c.counts(ctx) {
		ch <- prometheus.MustNewConstMetric(shardsDesiredDsc, prometheus.GaugeValue, float64(s.desired), s.namespace, s.kind, s.name)
		ch <- prometheus.MustNewConstMetric(shardsReadyDsc, prometheus.GaugeValue, float64(s.ready), s.namespace, s.kind, s.name)
	}
}

// storeLists are the lists of every store kind.
func storeLists() []client.ObjectList {
	return []client.ObjectList{&fleetv1alpha1.DurableObjectNamespaceList{}, &fleetv1alpha1.WorkflowList{},
		&fleetv1alpha1.KVNamespaceList{}, &fleetv1alpha1.D1DatabaseList{}, &fleetv1alpha1.QueueList{}}
}

// counts lists every store kind; a kind whose list fails is left out of this scrape
// (an absent series, not a false zero).
func (c *ShardsCollector) counts(ctx context.Context) []shardCount {
	var out []shardCount
	for _, list := range storeLists() {
		if c.Reader.List(ctx, list) != nil {
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			continue
		}
		for _, o := range items {
			if s, ok := shardsOf(o); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// shardsOf is a store's line: a DurableObjectNamespace wants the shards its StatefulSet
// is built for, every other store one pod.
func shardsOf(o runtime.Object) (shardCount, bool) {
	switch x := o.(type) {
	case *fleetv1alpha1.DurableObjectNamespace:
		return shardCount{fleetv1alpha1.ReferenceDurableObjectNamespace, x.Namespace, x.Name, x.ShardSetShards(), x.Status.ReadyShards}, true
	case *fleetv1alpha1.Workflow:
		return shardCount{fleetv1alpha1.ReferenceWorkflow, x.Namespace, x.Name, 1, x.Status.ReadyShards}, true
	case *fleetv1alpha1.KVNamespace:
		return shardCount{fleetv1alpha1.ReferenceKVNamespace, x.Namespace, x.Name, 1, x.Status.ReadyShards}, true
	case *fleetv1alpha1.D1Database:
		return shardCount{fleetv1alpha1.ReferenceD1Database, x.Namespace, x.Name, 1, x.Status.ReadyShards}, true
	case *fleetv1alpha1.Queue:
		return shardCount{fleetv1alpha1.ReferenceQueue, x.Namespace, x.Name, 1, x.Status.ReadyShards}, true
	}
	return shardCount{}, false
}
