package common

import (
	"context"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WriteStatus sets *status to st and writes obj's status subresource with one update,
// unless st equals the status obj was read with. Condition transition times are part
// of the comparison: meta.SetStatusCondition keeps them when a condition is unchanged.
func WriteStatus[S any](ctx context.Context, c client.Client, obj client.Object, status *S, st S) error {
	if reflect.DeepEqual(*status, st) {
		return nil
	}
	*status = st
	return c.Status().Update(ctx, obj)
}
