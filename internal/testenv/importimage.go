package testenv

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/internal/bundleimage"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// ImportImage is `workerd-operator import --image REF --push` (o.Image is REF): it
// imports the project, pushes its image and points the objects at the pushed,
// digest-pinned reference. It returns the import and its objects, ready to apply.
func ImportImage(o wrangler.Options) (*wrangler.Result, *bundleimage.Manifest, []*unstructured.Unstructured, error) {
	res, err := wrangler.Import(o)
	if err != nil {
		return nil, nil, nil, err
	}
	pinned, m, err := bundleimage.Publish(*res.Image, o.Image, true, "")
	if err != nil {
		return nil, nil, nil, err
	}
	res.SetImage(pinned)
	objs, err := res.Unstructured()
	return res, m, objs, err
}
