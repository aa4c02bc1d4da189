package common

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// CheckBackup blocks a store whose backup or restore (under field, "spec" or
// "spec.engine") names a Secret that does not exist, or restores from its own backup
// (docs/backup.md). meta reads Secrets' metadata only: values are never read.
func CheckBackup(ctx context.Context, meta client.Reader, namespace, field string, bk specs.StoreBackup) error {
	if msg := fleetv1alpha1.RestoreConflict(bk.Backup, bk.Restore, bk.Path); msg != "" {
		return Blocked(fleetv1alpha1.ReasonInvalidSpec, field+".restore: "+msg)
	}
	for _, b := range bk.Buckets() {
		name := b.S3.CredentialsSecret.Name
		err := meta.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, ReferenceMeta("Secret"))
		if apierrors.IsNotFound(err) {
			return Blocked(fleetv1alpha1.ReasonSecretNotFound, fmt.Sprintf(
				"%s.%s.s3.credentialsSecret: Secret %q not found in namespace %q (keys %s and %s; docs/backup.md)",
				field, b.Field, name, namespace, fleetv1alpha1.R2AccessKeyIDKey, fleetv1alpha1.R2SecretAccessKeyKey))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
