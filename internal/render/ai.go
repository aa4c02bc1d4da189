package render

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// aiAPIModule is workerd's Workers AI binding module (a `wrapped` binding over a
// service it calls "fetcher").
const aiAPIModule = "cloudflare-internal:ai-api"

// AIBinding is one ai binding of the sidecar's AI gateway as the sidecar env carries it
// (podcontract.AIConfigEnv): internal/sidecar/ai.BindingConfig's JSON.
type AIBinding struct {
	Name      string    `json:"name"`
	URLEnv    string    `json:"urlEnv"`
	APIKeyEnv string    `json:"apiKeyEnv"`
	ModelsEnv string    `json:"modelsEnv"`
	Models    []AIModel `json:"models,omitempty"`
}

// AIModel is one entry of an ai binding's model map (internal/sidecar/ai.Model).
type AIModel struct {
	Name  string `json:"name"`
	Model string `json:"model"`
	URL   string `json:"url,omitempty"`
}

// AIService is the external service of ai binding name: an alias of the sidecar whose
// requests carry the binding's name in podcontract.AIBindingHeader.
func AIService(name string) string { return podcontract.AIServicePrefix + name }

// aiKind: Workers AI, through workerd's own ai-api module over an alias of the
// sidecar, whose AI gateway calls the OpenAI-compatible server the binding's Secret
// names. The server's URL and key reach only the sidecar, as env from that Secret.
type aiKind struct{ entries []v1alpha1.Binding }

func (k *aiKind) bind(field string, b v1alpha1.Binding) (string, error) {
	if b.AI.SecretRef.Name == "" {
		return "", fmt.Errorf("%s.ai.secretRef.name: required", field)
	}
	k.entries = append(k.entries, b)
	inner := tuple(kv("name", Quote("fetcher")), kv("service", Quote(AIService(b.Name))))
	return kv("wrapped", tuple(kv("moduleName", Quote(aiAPIModule)), kv("innerBindings", list(inner)))), nil
}

// contribute adds one sidecar alias per binding and the sidecar's AI env.
func (k *aiKind) contribute(x *extras) error {
	if len(k.entries) == 0 {
		return nil
	}
	var cfg []AIBinding
	for i, b := range k.entries {
		header := tuple(named(podcontract.AIBindingHeader), kv("value", Quote(b.Name)))
		x.services.item(named(AIService(b.Name)), kv("external", "(http = "+tuple(kv("injectRequestHeaders", list(header)))+")"))
		c := AIBinding{Name: b.Name}
		for _, key := range []struct {
			key      string
			env      *string
			optional bool
		}{{v1alpha1.AIURLKey, &c.URLEnv, false}, {v1alpha1.AIAPIKeyKey, &c.APIKeyEnv, true}, {v1alpha1.AIModelsKey, &c.ModelsEnv, true}} {
			*key.env = fmt.Sprintf("%s%d_%s", podcontract.AIEnvPrefix, i, strings.ToUpper(key.key))
			x.sidecarEnv = append(x.sidecarEnv, corev1.EnvVar{Name: *key.env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: b.AI.SecretRef.Name}, Key: key.key, Optional: ptr.To(key.optional),
			}}})
		}
		for _, m := range b.AI.Models {
			c.Models = append(c.Models, AIModel(m))
		}
		cfg = append(cfg, c)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	x.sidecarEnv = append(x.sidecarEnv, corev1.EnvVar{Name: podcontract.AIConfigEnv, Value: string(raw)})
	return nil
}

// AIServices are the external services of w's ai bindings, which take the sidecar's
// address (Args, localrun).
func AIServices(w *v1alpha1.Worker) []string {
	var out []string
	for _, b := range w.Spec.Bindings {
		if b.AI != nil {
			out = append(out, AIService(b.Name))
		}
	}
	return out
}
