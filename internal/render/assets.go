package render

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// assetsConfig is the JSON config of workerd's assets service (workerd.capnp
// AssetsService.config): wrangler's `assets` keys plus the text of _headers and
// _redirects. Field order is fixed, so equal specs give equal configs.
type assetsConfig struct {
	HTMLHandling     string   `json:"html_handling,omitempty"`
	NotFoundHandling string   `json:"not_found_handling,omitempty"`
	RunWorkerFirst   []string `json:"run_worker_first,omitempty"`
	Headers          string   `json:"headers,omitempty"`
	Redirects        string   `json:"redirects,omitempty"`
}

// AssetsConfigJSON is the assets service's config for spec.assets a. Unset fields are
// left out, so workerd applies Cloudflare's defaults (auto-trailing-slash, none).
func AssetsConfigJSON(a *v1alpha1.WorkerAssets) (string, error) {
	b, err := json.Marshal(assetsConfig{
		HTMLHandling:     string(a.HTMLHandling),
		NotFoundHandling: string(a.NotFoundHandling),
		RunWorkerFirst:   a.RunWorkerFirst,
		Headers:          a.Headers,
		Redirects:        a.Redirects,
	})
	return string(b), err
}

// AssetsPath is spec.assets.path, default v1alpha1.DefaultAssetsPath.
func AssetsPath(a *v1alpha1.WorkerAssets) string {
	if a.Path == "" {
		return v1alpha1.DefaultAssetsPath
	}
	return a.Path
}

// addAssets renders spec.assets: the assets service over the mounted directory
// (podcontract.AssetsSubdir, relative to the working directory, which is ConfigDir in
// the pod and the config's directory in local runs), in front of the user's Worker
// svcName, the http socket pointed at it, and the assets binding to its AssetWorker
// entrypoint. rpc, health and trigger keep reaching the Worker itself.
func addAssets(w *v1alpha1.Worker, x *extras) error {
	a := w.Spec.Assets
	x.httpService = WorkerServiceName(w.Name)
	if a == nil {
		return nil
	}
	if err := checkAssets(a); err != nil {
		return err
	}
	cfg, err := AssetsConfigJSON(a)
	if err != nil {
		return fmt.Errorf("spec.assets: %v", err)
	}
	x.services.item(named(podcontract.AssetsService), kv("assets", tuple(
		kv("path", Quote(podcontract.AssetsSubdir)),
		kv("config", Quote(cfg)),
		kv("userWorker", Quote(WorkerServiceName(w.Name))))))
	x.httpService = podcontract.AssetsService
	if a.Binding == "" {
		return nil
	}
	if i, dup := x.names[a.Binding]; dup {
		return fmt.Errorf("spec.assets.binding: %q is also the name of spec.bindings[%d]", a.Binding, i)
	}
	x.bindings = append(x.bindings, bindingLine{a.Binding, kv("service", tuple(
		named(podcontract.AssetsService), kv("entrypoint", Quote(podcontract.AssetWorkerEntrypoint))))})
	return nil
}

// checkAssets checks what the renderer relies on (the CRD schema checks it too).
func checkAssets(a *v1alpha1.WorkerAssets) error {
	if a.Image == "" {
		return fmt.Errorf("spec.assets.image: required")
	}
	p := AssetsPath(a)
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("spec.assets.path: %q must start with \"/\"", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return fmt.Errorf("spec.assets.path: %q may not contain a \"..\" segment", p)
		}
	}
	for i, r := range a.RunWorkerFirst {
		if !strings.HasPrefix(strings.TrimPrefix(r, "!"), "/") {
			return fmt.Errorf("spec.assets.runWorkerFirst[%d]: %q must start with \"/\" or \"!/\" (https://developers.cloudflare.com/workers/static-assets/binding/#run_worker_first)", i, r)
		}
	}
	return nil
}
