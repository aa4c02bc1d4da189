// Package r2bucket reconciles R2Buckets: an R2Bucket has no children (the pods of the
// Workers binding it reach its store through their sidecars, docs/r2.md); its status
// says whether its credentials Secret exists with both keys. The manager never contacts
// the store: its endpoint is the author's, and a manager that dialed it would reach for
// them whatever the manager can reach.
package r2bucket

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
)

// Reconciler reconciles R2Buckets.
type Reconciler struct {
	client.Client
	Events common.Events
	// Refs reads the credentials Secret's metadata: the manager's cache holds only the
	// operator's labelled Secrets.
	Refs *common.References
}

// IndexSecret indexes R2Buckets by their credentials Secret.
const IndexSecret = ".spec.s3.credentialsSecret.name"

// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=r2buckets,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.workerd-operator.io,resources=r2buckets/status,verbs=get;update;patch

// Reconcile checks the credentials Secret and writes the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rb := &fleetv1alpha1.R2Bucket{}
	if err := r.Get(ctx, req.NamespacedName, rb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := *rb.Status.DeepCopy()
	st.ObservedGeneration = rb.Generation
	conds := common.Conditions{List: &st.Conditions, Generation: rb.Generation}
	missing, err := r.missingKeys(ctx, rb)
	switch {
	case err != nil:
		conds.Set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonReconcileError, err.Error())
	case missing != "":
		conds.Set(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonSecretNotFound, missing)
	default:
		conds.Set(fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonReconciled,
			fmt.Sprintf("bucket %q at %s with the credentials of Secret %q (both keys present; the store itself is not contacted)",
				rb.Spec.S3.Bucket, rb.Spec.S3.Endpoint, rb.Spec.S3.CredentialsSecret.Name))
	}
	r.Events.Transitions(ctx, rb, rb.Status.Conditions, st.Conditions)
	if werr := common.WriteStatus(ctx, r.Client, rb, &rb.Status, st); werr != nil {
		return ctrl.Result{}, werr
	}
	return ctrl.Result{}, err
}

// missingKeys says what is missing of the credentials Secret ("" when nothing): the
// Secret, or one of the two keys the sidecar's env names (without it the pods' sidecars
// do not start, CreateContainerConfigError). Only metadata is read: the operator never
// holds secret values. The cache keeps no managed fields, so the key names come from a
// live metadata read of the Secret's managedFields, which list the data keys each
// writer set (names, no values).
func (r *Reconciler) missingKeys(ctx context.Context, rb *fleetv1alpha1.R2Bucket) (string, error) {
	name := rb.Spec.S3.CredentialsSecret.Name
	key := types.NamespacedName{Namespace: rb.Namespace, Name: name}
	notFound := fmt.Sprintf("spec.s3.credentialsSecret: Secret %q not found in namespace %q", name, rb.Namespace)
	err := r.Refs.Meta.Get(ctx, key, common.ReferenceMeta("Secret"))
	if apierrors.IsNotFound(err) {
		return notFound, nil
	}
	if err != nil {
		return "", err
	}
	live := common.ReferenceMeta("Secret")
	if err := r.Refs.Live.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return notFound, nil
		}
		return "", err
	}
	keys, known := dataKeys(live.ManagedFields)
	var missing []string
	for _, k := range []string{fleetv1alpha1.R2AccessKeyIDKey, fleetv1alpha1.R2SecretAccessKeyKey} {
		if known && !keys[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("spec.s3.credentialsSecret: Secret %q has no key %s (it needs %s and %s)",
			name, strings.Join(missing, ", "), fleetv1alpha1.R2AccessKeyIDKey, fleetv1alpha1.R2SecretAccessKeyKey), nil
	}
	return "", nil
}

// dataKeys are the Secret's keys as its managedFields record them: under data for a
// create or update (stringData is converted first), under stringData for a server-side
// apply. known is false when there are no managed fields at all (someone cleared
// them): then nothing can be said. A key a later server-side apply dropped from
// stringData stays in data but no longer counts.
func dataKeys(mf []metav1.ManagedFieldsEntry) (keys map[string]bool, known bool) {
	keys = map[string]bool{}
	for _, e := range mf {
		if e.FieldsV1 == nil {
			continue
		}
		var f map[string]map[string]json.RawMessage
		if json.Unmarshal(e.FieldsV1.Raw, &f) != nil {
			continue
		}
		for _, field := range []string{"f:data", "f:stringData"} {
			for k := range f[field] {
				if name, ok := strings.CutPrefix(k, "f:"); ok {
					keys[name] = true
				}
			}
		}
	}
	return keys, len(mf) > 0
}

// SetupWithManager registers the reconciler; a change of a Secret requeues the
// R2Buckets naming it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &fleetv1alpha1.R2Bucket{}, IndexSecret, func(o client.Object) []string {
		return []string{o.(*fleetv1alpha1.R2Bucket).Spec.S3.CredentialsSecret.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.R2Bucket{}).
		WatchesRawSource(r.Refs.Watch("Secret", r.bucketsOf)).
		Named("r2bucket").
		Complete(r)
}

func (r *Reconciler) bucketsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var l fleetv1alpha1.R2BucketList
	if err := r.List(ctx, &l, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexSecret: o.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, b := range l.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
	}
	return slices.Clip(reqs)
}
