package webhook

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// UpgradesDoc is the document on workerd releases that runtime errors cite.
const UpgradesDoc = "docs/upgrades.md"

// validateRuntime: an image whose tag names a workerd release must name the release
// spec.runtime.version declares, which the operator checks the Worker against (the
// compatibility date, the admin's allowed releases); the CRD requires the version with
// an image.
func validateRuntime(path *field.Path, rt *v1alpha1.RuntimeSpec) *field.Error {
	if rt == nil || rt.Image == "" {
		return nil
	}
	if tag := podcontract.ImageWorkerdVersion(rt.Image); tag != "" && tag != rt.Version {
		return field.Invalid(path.Child("version"), rt.Version, fmt.Sprintf(
			"spec.runtime.image %q holds workerd %s: the version must name the release the image holds (see %s)", rt.Image, tag, UpgradesDoc))
	}
	return nil
}

// runtimeVersion is spec.runtime.version, "" for the operator's workerd.
func runtimeVersion(s *v1alpha1.WorkerSpec) string {
	if s.Runtime == nil {
		return ""
	}
	return s.Runtime.Version
}
