package render

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// LoaderCode is a Shared user Worker as its dispatch Workers' pods load it (shim
// dispatch.js gives it to workerd's workerLoader): the manager serves it to their
// sidecars (internal/userworkers), which pass it on unchanged.
type LoaderCode struct {
	// Placement is the Worker's spec.dispatchPlacement; a Dedicated Worker carries
	// nothing else (its calls go to its own pods).
	Placement v1alpha1.DispatchPlacement `json:"placement"`
	// ID names this code: it changes whenever anything below does, so a loader that
	// caches isolates by it never runs stale code.
	ID                 string          `json:"id,omitempty"`
	CompatibilityDate  string          `json:"compatibilityDate,omitempty"`
	CompatibilityFlags []string        `json:"compatibilityFlags,omitempty"`
	MainModule         string          `json:"mainModule,omitempty"`
	Modules            []LoaderModule  `json:"modules,omitempty"`
	Env                json.RawMessage `json:"env,omitempty"`
}

// LoaderModule is one module in workerLoader's terms: type js, cjs, text, data, wasm or
// json; data and wasm content is base64.
type LoaderModule struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Content string `json:"content"`
}

// loaderTypes maps module types to workerLoader's module keys.
var loaderTypes = map[v1alpha1.ModuleType]string{
	v1alpha1.ModuleESModule: "js", v1alpha1.ModuleCommonJS: "cjs", v1alpha1.ModuleText: "text",
	v1alpha1.ModuleData: "data", v1alpha1.ModuleWasm: "wasm", v1alpha1.ModuleJSON: "json",
}

// SharedLoaderCode resolves Shared user Worker w (with the ConfigMap its
// spec.source.configMap names, else nil) into the code its dispatchers load. Only text
// and json bindings reach its env: admission refuses the others for a Shared Worker.
func SharedLoaderCode(w *v1alpha1.Worker, cm *corev1.ConfigMap) (*LoaderCode, error) {
	if !w.SharedUserWorker() {
		return &LoaderCode{Placement: v1alpha1.DispatchPlacementDedicated}, nil
	}
	if w.Spec.Source.Image != nil {
		return nil, fmt.Errorf("spec.source.image: a Shared user Worker takes inline or configMap modules (docs/dispatch.md)")
	}
	src, err := resolveSource(Input{Worker: w, ConfigMap: cm})
	if err != nil {
		return nil, err
	}
	c := &LoaderCode{Placement: v1alpha1.DispatchPlacementShared, CompatibilityDate: w.Spec.CompatibilityDate,
		CompatibilityFlags: w.Spec.CompatibilityFlags, MainModule: src.modules[0].name}
	for _, m := range src.modules {
		content := string(m.data)
		if m.typ == v1alpha1.ModuleData || m.typ == v1alpha1.ModuleWasm {
			content = base64.StdEncoding.EncodeToString(m.data)
		}
		c.Modules = append(c.Modules, LoaderModule{Name: m.name, Type: loaderTypes[m.typ], Content: content})
	}
	if c.Env, err = loaderEnv(w.Spec.Bindings); err != nil {
		return nil, err
	}
	sum := sha256.New()
	if err := json.NewEncoder(sum).Encode(c); err != nil {
		return nil, err
	}
	c.ID = hex.EncodeToString(sum.Sum(nil)[:16])
	return c, nil
}

// loaderEnv is the env object of text and json bindings.
func loaderEnv(bindings []v1alpha1.Binding) (json.RawMessage, error) {
	env := map[string]json.RawMessage{}
	for i, b := range bindings {
		switch {
		case b.Text != nil:
			v, _ := json.Marshal(*b.Text)
			env[b.Name] = v
		case b.JSON != nil:
			if !json.Valid([]byte(*b.JSON)) {
				return nil, fmt.Errorf("spec.bindings[%d].json: not valid JSON", i)
			}
			env[b.Name] = json.RawMessage(*b.JSON)
		default:
			return nil, fmt.Errorf("spec.bindings[%d]: a Shared user Worker takes text and json bindings only (docs/dispatch.md)", i)
		}
	}
	return json.Marshal(env)
}
