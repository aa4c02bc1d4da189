package render

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

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

// AssetsImage is the image holding w's assets and its pull policy: spec.assets.image,
// else spec.source.image's image; spec.assets.pullPolicy, else (with the source's image)
// the source's. "" when w has no assets.
func AssetsImage(w *v1alpha1.Worker) (string, corev1.PullPolicy) {
	a := w.Spec.Assets
	if a == nil {
		return "", ""
	}
	if src := w.Spec.Source.Image; a.Image == "" && src != nil {
		policy := a.PullPolicy
		if policy == "" {
			policy = src.PullPolicy
		}
		return src.Image, policy
	}
	return a.Image, a.PullPolicy
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
func addAssets(in Input, x *extras) error {
	w := in.Worker
	a := w.Spec.Assets
	x.httpService, x.workerService = WorkerServiceName(w.Name), WorkerServiceName(w.Name)
	if a == nil {
		return nil
	}
	if img, _ := AssetsImage(w); img == "" {
		return fmt.Errorf("spec.assets.image: required unless spec.source.image names the image")
	}
	if err := checkAssets(a); err != nil {
		return err
	}
	cfg, err := AssetsConfigJSON(a)
	if err != nil {
		return fmt.Errorf("spec.assets: %v", err)
	}
	fields := []string{kv("path", Quote(podcontract.AssetsSubdir)), kv("config", Quote(cfg))}
	if AssetsOnly(w) {
		more, err := assetsOnlyFields(in)
		if err != nil {
			return err
		}
		fields = append(fields, more...)
		x.workerService = podcontract.AssetsService
	} else {
		fields = append(fields, kv("userWorker", Quote(WorkerServiceName(w.Name))))
	}
	x.services.item(named(podcontract.AssetsService), kv("assets", tuple(fields...)))
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

// AssetsOnly reports whether w is an assets-only Worker: spec.assets without
// spec.source.
func AssetsOnly(w *v1alpha1.Worker) bool {
	s := w.Spec.Source
	return w.Spec.Assets != nil && s.Inline == nil && s.ConfigMap == nil && s.Image == nil
}

// assetsOnlyFields are the assets service's compatibility date and flags when no user
// Worker selects them, after checking that nothing needs code: bindings, the assets
// binding, run_worker_first, a hosted class or workflow.
func assetsOnlyFields(in Input) ([]string, error) {
	s := in.Worker.Spec
	switch {
	case len(s.Bindings) > 0:
		return nil, fmt.Errorf("spec.bindings: an assets-only Worker (no spec.source) has no code to give bindings to")
	case s.Assets.Binding != "" || len(s.Assets.RunWorkerFirst) > 0:
		return nil, fmt.Errorf("spec.assets: binding and runWorkerFirst need a Worker script (spec.source); an assets-only Worker has none")
	case in.Host != "" || len(in.WorkflowHosts) > 0:
		return nil, fmt.Errorf("spec.source: an assets-only Worker has no code to host Durable Objects or Workflows")
	}
	flags, err := sortedFlags(s.CompatibilityFlags)
	if err != nil {
		return nil, err
	}
	fields := []string{kv("compatibilityDate", Quote(s.CompatibilityDate))}
	if len(flags) > 0 {
		fields = append(fields, kv("compatibilityFlags", list(quoteAll(flags)...)))
	}
	return fields, nil
}

// checkAssets checks what the renderer relies on (the CRD schema checks it too).
func checkAssets(a *v1alpha1.WorkerAssets) error {
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
