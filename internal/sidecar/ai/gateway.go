// Package ai is the sidecar's Workers AI gateway: it answers workerd's ai binding
// (cloudflare-internal:ai-api, a `wrapped` binding over an alias of the sidecar) by
// calling an OpenAI-compatible inference server, and returns Cloudflare's shapes
// (docs/ai.md).
//
// The binding's run(model, inputs, options) arrives as POST /run?version=3 with the
// model in the cf-consn-model-id header and {"inputs", "options"} as the body; its
// models() as GET /ai-api/models/search. Errors go back as {"errors":[{code, message}]},
// which the binding throws as InferenceUpstreamError("<code>: <message>").
package ai

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Doc is where a user reads about the binding; errors name it.
const Doc = "https://github.com/workerd-operator/workerd-operator/blob/main/docs/ai.md"

// maxRequestBytes bounds a run() request body: Cloudflare's request body limit for
// Workers AI inputs given as JSON is not published; 10 MiB holds any chat history a
// small context window can take.
const maxRequestBytes = 10 << 20

// maxAnswerBytes bounds a non-streamed answer of the inference server, read whole into
// the sidecar's memory (256 MiB): 100 vectors of 4096 dimensions take about 8 MiB.
const maxAnswerBytes = 8 << 20

// maxTexts bounds the texts of one embeddings call (Cloudflare's bge models take at
// most 100, https://developers.cloudflare.com/workers-ai/models/bge-base-en-v1.5/).
const maxTexts = 100

// BindingConfig is one ai binding as the rendered sidecar env carries it
// (podcontract.AIConfigEnv). The Secret's keys come from the named env vars.
type BindingConfig struct {
	// Name is the binding's name: the value of podcontract.AIBindingHeader.
	Name string `json:"name"`
	// URLEnv, APIKeyEnv and ModelsEnv name the env vars of the Secret's url, apiKey
	// and models keys (apiKey and models may be unset).
	URLEnv    string `json:"urlEnv,omitempty"`
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	ModelsEnv string `json:"modelsEnv,omitempty"`
	// Models are the binding's own entries (spec.bindings[].ai.models).
	Models []Model `json:"models,omitempty"`
	// URL, APIKey and SecretModels are the Secret's values themselves (tests).
	URL          string `json:"-"`
	APIKey       string `json:"-"`
	SecretModels string `json:"-"`
}

// Model maps Cloudflare model Name ("*": any other) to the server's Model, served at
// URL ("" is the binding's url).
type Model struct {
	Name  string `json:"name"`
	Model string `json:"model"`
	URL   string `json:"url,omitempty"`
}

// ParseConfig reads the JSON list of BindingConfig of podcontract.AIConfigEnv.
func ParseConfig(s string) ([]BindingConfig, error) {
	var out []BindingConfig
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("ai: $%s: %w", podcontract.AIConfigEnv, err)
	}
	return out, nil
}

// Options configure a Gateway.
type Options struct {
	// Logf receives the inference server's failures; nil discards them.
	Logf func(format string, args ...any)
	// Outbound, when set, are the Worker's outbound rules: the gateway connects to an
	// inference server only at an address they allow, as the R2 gateway does. nil: any
	// address (local runs and tests).
	Outbound *outbound.Rules
}

// Gateway answers the ai bindings of one pod's Worker.
type Gateway struct {
	bindings map[string]*binding
	client   *http.Client
	logf     func(format string, args ...any)
}

// New makes a Gateway for cfgs, reading each binding's Secret values from the env.
func New(cfgs []BindingConfig, o Options) *Gateway {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	g := &Gateway{bindings: map[string]*binding{}, client: newClient(o.Outbound), logf: logf}
	for _, c := range cfgs {
		g.bindings[c.Name] = newBinding(c)
	}
	return g
}

// newClient is the inference servers' client: no overall timeout (a stream lasts as
// long as the model writes; the Worker's request cancels it), no proxy (the outbound
// guard checks the address dialed, which must be the server's), no redirects.
func newClient(rules *outbound.Rules) *http.Client {
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	dial := d.DialContext
	if rules != nil {
		dial = rules.Dialer(d).DialContext
	}
	tr := &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ForceAttemptHTTP2: true}
	// A redirect is answered as the server's error, not followed: the Secret names the
	// server, not whoever it points to.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &http.Client{Transport: tr, CheckRedirect: noRedirect}
}

// ServeHTTP answers one call of the binding named by podcontract.AIBindingHeader.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.Header.Get(podcontract.AIBindingHeader)
	b, ok := g.bindings[name]
	if !ok {
		g.logf("ai: no binding %q configured (header %s)", name, podcontract.AIBindingHeader)
		writeError(w, http.StatusInternalServerError, fmt.Errorf("the ai binding %q is not configured in this pod", name))
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/run":
		g.run(w, r, b)
	case r.Method == http.MethodGet && r.URL.Path == "/ai-api/models/search":
		b.listModels(w)
	default:
		writeError(w, http.StatusNotImplemented, fmt.Errorf("%s %s: only run() and models() of the AI binding are supported here (no AI Gateway, AutoRAG, toMarkdown or websocket; see %s)", r.Method, r.URL.Path, Doc))
	}
}

// binding is one configured ai binding.
type binding struct {
	name, url, apiKey string
	models            map[string]Model
	// secretURL: the entry's url, if any, is the Secret's, so the Secret's key may go there.
	secretURL map[string]bool
	// configErr is a fault of the Secret's values, answered to every call.
	configErr error
}

func newBinding(c BindingConfig) *binding {
	b := &binding{name: c.Name, url: c.URL, apiKey: c.APIKey, models: map[string]Model{}, secretURL: map[string]bool{}}
	if c.URLEnv != "" {
		b.url = os.Getenv(c.URLEnv)
	}
	if c.APIKeyEnv != "" {
		b.apiKey = os.Getenv(c.APIKeyEnv)
	}
	// A Secret written from a file or with echo ends in a newline: not part of the value.
	b.url, b.apiKey = strings.TrimSpace(b.url), strings.TrimSpace(b.apiKey)
	secretModels := c.SecretModels
	if c.ModelsEnv != "" {
		secretModels = os.Getenv(c.ModelsEnv)
	}
	if b.url == "" {
		b.configErr = fmt.Errorf("the ai binding %q has no server: its Secret's key %q is empty (%s)", c.Name, "url", Doc)
	}
	if secretModels != "" {
		ms, err := parseSecretModels(secretModels)
		if err != nil {
			b.configErr = fmt.Errorf("the ai binding %q: its Secret's key %q: %w (%s)", c.Name, "models", err, Doc)
		}
		for _, m := range ms {
			b.models[m.Name], b.secretURL[m.Name] = m, true
		}
	}
	for _, m := range c.Models { // the binding's own entries win
		b.models[m.Name], b.secretURL[m.Name] = m, m.URL == ""
	}
	return b
}

// parseSecretModels reads the Secret's models key: a JSON object from Cloudflare model
// names to the server's, each value a model name or {"model", "url"}.
func parseSecretModels(s string) ([]Model, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("want a JSON object of model names: %v", err)
	}
	var out []Model
	for name, v := range raw {
		m := Model{Name: name}
		if err := json.Unmarshal(v, &m.Model); err != nil {
			if err := json.Unmarshal(v, &m); err != nil || m.Model == "" {
				return nil, fmt.Errorf("%q: want a model name or {\"model\": ..., \"url\": ...}", name)
			}
			m.Name = name
		}
		out = append(out, m)
	}
	return out, nil
}

// resolve is the server's model and base URL for Cloudflare model name, and the key to
// send there: the Secret's apiKey goes only to a url the Secret names, never to one a
// Worker's own entry names (its author may not read the Secret).
func (b *binding) resolve(name string) (Model, string, error) {
	m, ok := b.models[name]
	if !ok {
		m, ok = b.models["*"]
	}
	if !ok {
		return Model{}, "", fmt.Errorf("no such model %s: map it to a model of the inference server in spec.bindings[].ai.models or the Secret's %q key (%s)", name, "models", Doc)
	}
	key := ""
	if b.secretURL[m.Name] {
		key = b.apiKey
	}
	if m.URL == "" {
		m.URL = b.url
	}
	// "http://host/v1/" and "http://host/v1" are the same base: the paths are appended.
	m.URL = strings.TrimRight(strings.TrimSpace(m.URL), "/")
	return m, key, nil
}

// listModels answers models(): the mapped names, as Cloudflare's model search lists them.
func (b *binding) listModels(w http.ResponseWriter) {
	type entry struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	out := []entry{}
	for _, name := range sortedNames(b.models) {
		if name == "*" { // a default, not a model
			continue
		}
		out = append(out, entry{Name: name, Description: "served as " + b.models[name].Model})
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "result": out})
}
