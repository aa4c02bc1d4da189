package webhook

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
)

// R2BucketValidator validates an R2Bucket.
type R2BucketValidator struct{ w *Webhooks }

var _ admission.Validator[*v1alpha1.R2Bucket] = (*R2BucketValidator)(nil)

// R2BucketValidator returns the R2Bucket validator.
func (w *Webhooks) R2BucketValidator() *R2BucketValidator { return &R2BucketValidator{w} }

// ValidateCreate implements admission.Validator.
func (v *R2BucketValidator) ValidateCreate(ctx context.Context, o *v1alpha1.R2Bucket) (admission.Warnings, error) {
	return v.w.ValidateR2Bucket(ctx, o)
}

// ValidateUpdate implements admission.Validator.
func (v *R2BucketValidator) ValidateUpdate(ctx context.Context, _, o *v1alpha1.R2Bucket) (admission.Warnings, error) {
	return v.w.ValidateR2Bucket(ctx, o)
}

// ValidateDelete implements admission.Validator; deletes are always allowed.
func (v *R2BucketValidator) ValidateDelete(context.Context, *v1alpha1.R2Bucket) (admission.Warnings, error) {
	return nil, nil
}

// ValidateR2Bucket refuses an endpoint the admin's outbound policy denies. The sidecar
// of every Worker binding the bucket connects there; it checks each address it dials
// against the Worker's outbound rules, and this catches, at admission, what it can:
// an endpoint whose host is an address.
func (w *Webhooks) ValidateR2Bucket(_ context.Context, o *v1alpha1.R2Bucket) (admission.Warnings, error) {
	c := &check{}
	c.add(validateSidecarEndpoint(field.NewPath("spec", "s3", "endpoint"), o.Spec.S3.Endpoint, w.opts.Policy.OutboundDeny,
		"the sidecar of every Worker binding the bucket would connect there"))
	return c.result("R2Bucket", o.Name)
}

// validateSidecarEndpoint refuses an endpoint the pods' sidecar connects to (why says
// for whom) whose host is an IP address within deny. A name is left to the sidecar's
// dial-time check (it may resolve anywhere, later).
func validateSidecarEndpoint(path *field.Path, endpoint string, deny []string, why string) *field.Error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil // the CRD's pattern refuses what does not parse
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil
	}
	if !outbound.Denies(deny, addr) {
		return nil
	}
	return forbidden(path, fmt.Sprintf("connecting to %s is not allowed: %s", u.Hostname(), why),
		"denied: "+strings.Join(deny, ", "), "--outbound-deny, Helm policy.outboundDeny; see "+outbound.Doc)
}
