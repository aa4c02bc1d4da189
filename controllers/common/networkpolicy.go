package common

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SyncNetworkPolicy applies np, the NetworkPolicy of owner's pods, when on, and deletes
// it when off. Either way it leaves alone a NetworkPolicy of that name owner does not
// control: applying would take it over, so that is an error.
func SyncNetworkPolicy(ctx context.Context, c client.Client, owner metav1.Object, np *networkingv1.NetworkPolicy, on bool) error {
	live := &networkingv1.NetworkPolicy{}
	err := c.Get(ctx, client.ObjectKeyFromObject(np), live)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	exists := err == nil
	if exists && !metav1.IsControlledBy(live, owner) {
		if !on {
			return nil
		}
		return fmt.Errorf("NetworkPolicy %s exists and is not controlled by %s: delete or rename it", np.Name, owner.GetName())
	}
	switch {
	case on:
		return ApplyAll(ctx, c, np)
	case exists:
		return client.IgnoreNotFound(c.Delete(ctx, live))
	}
	return nil
}
