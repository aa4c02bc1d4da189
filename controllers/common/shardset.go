package common

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// The PodDisruptionBudget of every StatefulSet; the garbage collector deletes it with
// its owner, so no delete.
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch

// ApplyShardSet applies the NetworkPolicy (SyncNetworkPolicy: deleted when
// networkPolicies is off), ConfigMap, Service, PodDisruptionBudget and StatefulSet of
// owner (a DurableObjectNamespace, a Workflow or a data store), records an Applied
// event when the pods' version changes, deletes owner's ConfigMaps of older versions
// (those matching selector) and returns the live StatefulSet.
func ApplyShardSet(ctx context.Context, c client.Client, ev Events, owner client.Object, selector map[string]string, set specs.ShardSet, networkPolicies bool) (*appsv1.StatefulSet, error) {
	key := client.ObjectKeyFromObject(set.StatefulSet)
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, key, sts); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	before := sts.Spec.Template.Annotations[podcontract.AnnotationVersion]
	if err := SyncNetworkPolicy(ctx, c, owner, set.NetworkPolicy, networkPolicies); err != nil {
		return nil, err
	}
	if err := ApplyAll(ctx, c, set.ConfigMap, set.Service, set.PodDisruptionBudget, set.StatefulSet); err != nil {
		return nil, err
	}
	version := set.StatefulSet.Spec.Template.Annotations[podcontract.AnnotationVersion]
	ev.Applied(ctx, owner, before, version)
	log.FromContext(ctx).V(1).Info("applied the children", "statefulSet", key.Name, "version", version)
	keep := map[string]bool{set.ConfigMap.Name: true}
	if err := DeleteOwnedConfigMaps(ctx, c, owner, client.MatchingLabels(selector), keep); err != nil {
		return nil, err
	}
	return Live(ctx, c, set.StatefulSet, sts)
}

// Live reads the live state of applied, an object this pass just applied, into into.
// When the cache has not seen it yet (just created), into is applied itself, with no
// status: its creation event requeues the pass, which then reads the real one.
func Live[T client.Object](ctx context.Context, c client.Reader, applied, into T) (T, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(applied), into)
	if apierrors.IsNotFound(err) {
		log.FromContext(ctx).V(1).Info("not in the cache yet", "name", applied.GetName())
		return applied, nil
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return into, nil
}
