package render_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// TestAIBindingRenders: an ai binding is workerd's own ai-api module over an alias of
// the sidecar; the server's url, key and model map reach only the sidecar, from the
// Secret (the url required, the rest optional), never the config.
func TestAIBindingRenders(t *testing.T) {
	w := inlineWorker("chat", "export default {}")
	w.Spec.Bindings = []v1alpha1.Binding{{Name: "AI", AI: &v1alpha1.AIBinding{
		SecretRef: v1alpha1.LocalObjectReference{Name: "workers-ai"},
		Models:    []v1alpha1.AIModel{{Name: "@cf/baai/bge-base-en-v1.5", Model: "bge", URL: "http://emb:8080/v1"}},
	}}}
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(fileByPath(t, out, podcontract.ConfigFile))
	for _, want := range []string{
		`(name = "AI", wrapped = (moduleName = "cloudflare-internal:ai-api", innerBindings = [(name = "fetcher", service = "ai:AI")]))`,
		`(name = "ai:AI", external = (http = (injectRequestHeaders = [(name = "` + podcontract.AIBindingHeader + `", value = "AI")])))`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s", want)
		}
	}
	if strings.Contains(cfg, "workers-ai") {
		t.Error("the Secret's name reaches the config")
	}
	env := map[string]string{}
	for _, e := range out.SidecarEnv {
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			env[e.Name] = ref.Name + "/" + ref.Key + map[bool]string{true: " optional", false: ""}[*ref.Optional]
		} else {
			env[e.Name] = e.Value
		}
	}
	var bindings []render.AIBinding
	if err := json.Unmarshal([]byte(env[podcontract.AIConfigEnv]), &bindings); err != nil || len(bindings) != 1 {
		t.Fatalf("%s = %q: %v", podcontract.AIConfigEnv, env[podcontract.AIConfigEnv], err)
	}
	b := bindings[0]
	if b.Name != "AI" || env[b.URLEnv] != "workers-ai/url" || env[b.APIKeyEnv] != "workers-ai/apiKey optional" || env[b.ModelsEnv] != "workers-ai/models optional" {
		t.Errorf("binding %+v, env %v", b, env)
	}
	if len(b.Models) != 1 || b.Models[0] != (render.AIModel{Name: "@cf/baai/bge-base-en-v1.5", Model: "bge", URL: "http://emb:8080/v1"}) {
		t.Errorf("models %+v", b.Models)
	}
	if !slices.Contains(render.SidecarAliases(w), "ai:AI") {
		t.Errorf("aliases %v lack ai:AI", render.SidecarAliases(w))
	}
}
