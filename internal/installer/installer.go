// Package installer builds the install bundle (dist/install.yaml): the kustomize build
// of config/default with the operator and workerd images set. `make build-installer`,
// `make dev` and the e2e tests use the same code, so what is tested is what users apply.
package installer

import (
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Default images; the manager's --workerd-image default and the images in config/.
const (
	DefaultOperatorImage = podcontract.DefaultOperatorImage
	DefaultWorkerdImage  = podcontract.DefaultWorkerdImage
)

// Build returns the install bundle as multi-document YAML, built from
// <repoRoot>/config/default with the given images ("" keeps the defaults).
func Build(repoRoot, operatorImage, workerdImage string) ([]byte, error) {
	return BuildOverlay(repoRoot, "default", operatorImage, workerdImage)
}

// CustomMetricsOverlay is config/default with the custom metrics API on
// (docs/scaling.md "Autoscaling a Worker").
const CustomMetricsOverlay = "custom-metrics"

// BuildOverlay is Build of <repoRoot>/config/<overlay>.
func BuildOverlay(repoRoot, overlay, operatorImage, workerdImage string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	// Namespaces and CRDs first, webhook configurations last (what `kustomize build`
	// and kubectl users get), so the bundle applies in one pass.
	opts.Reorder = krusty.ReorderOptionLegacy
	k := krusty.MakeKustomizer(opts)
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "config", overlay))
	if err != nil {
		return nil, fmt.Errorf("installer: kustomize config/%s: %w", overlay, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("installer: %w", err)
	}
	s := string(out)
	if operatorImage != "" && operatorImage != DefaultOperatorImage {
		s = strings.ReplaceAll(s, DefaultOperatorImage, operatorImage)
	}
	if workerdImage != "" && workerdImage != DefaultWorkerdImage {
		s = strings.ReplaceAll(s, "- manager\n", "- manager\n            - --workerd-image="+workerdImage+"\n")
	}
	return []byte(s), nil
}
