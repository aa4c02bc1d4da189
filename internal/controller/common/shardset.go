package common

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// ApplyShardSet applies the ConfigMap, Service and StatefulSet of owner (a
// DurableObjectNamespace or a Workflow), records an Applied event when the pods'
// version changes, deletes owner's ConfigMaps of older versions (those matching
// selector) and returns the live StatefulSet.
func ApplyShardSet(ctx context.Context, c client.Client, ev Events, owner client.Object, selector map[string]string, set specs.ShardSet) (*appsv1.StatefulSet, error) {
	key := client.ObjectKeyFromObject(set.StatefulSet)
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, key, sts); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	before := sts.Spec.Template.Annotations[podcontract.AnnotationVersion]
	if err := ApplyAll(ctx, c, set.ConfigMap, set.Service, set.StatefulSet); err != nil {
		return nil, err
	}
	version := set.StatefulSet.Spec.Template.Annotations[podcontract.AnnotationVersion]
	ev.Applied(ctx, owner, before, version)
	log.FromContext(ctx).V(1).Info("applied the children", "statefulSet", key.Name, "version", version)
	keep := map[string]bool{set.ConfigMap.Name: true}
	if err := DeleteOwnedConfigMaps(ctx, c, owner, client.MatchingLabels(selector), keep); err != nil {
		return nil, err
	}
	if err := c.Get(ctx, key, sts); err != nil {
		return nil, err
	}
	return sts, nil
}
