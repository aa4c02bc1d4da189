package ai

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// TestModelResolution: the binding's entries win over the Secret's, a name wins over
// "*", a model without its own url is served at the binding's, a trailing slash of a
// url does not count, the Secret's key goes
// only to urls the Secret names, and a Secret whose values are unusable is named in the
// error every call gets.
func TestModelResolution(t *testing.T) {
	b := newBinding(BindingConfig{Name: "AI", URL: "http://chat/v1/", APIKey: "sk-secret",
		SecretModels: `{"@cf/a": "secret-a", "@cf/b": {"model": "secret-b", "url": "http://emb/v1"}, "*": "secret-any"}`,
		Models:       []Model{{Name: "@cf/a", Model: "binding-a"}, {Name: "@cf/c", Model: "own", URL: "http://elsewhere/v1"}, {Name: "@cf/d", Model: "own-d", URL: "http://other/v1//"}}})
	if b.configErr != nil {
		t.Fatal(b.configErr)
	}
	for name, want := range map[string]struct {
		m   Model
		key string
	}{
		"@cf/a":     {Model{Name: "@cf/a", Model: "binding-a", URL: "http://chat/v1"}, "sk-secret"},
		"@cf/b":     {Model{Name: "@cf/b", Model: "secret-b", URL: "http://emb/v1"}, "sk-secret"},
		"@cf/c":     {Model{Name: "@cf/c", Model: "own", URL: "http://elsewhere/v1"}, ""},
		"@cf/d":     {Model{Name: "@cf/d", Model: "own-d", URL: "http://other/v1"}, ""},
		"@cf/other": {Model{Name: "*", Model: "secret-any", URL: "http://chat/v1"}, "sk-secret"},
	} {
		if got, key, err := b.resolve(name); err != nil || got != want.m || key != want.key {
			t.Errorf("resolve(%s) = %+v, key %q, %v; want %+v, key %q", name, got, key, err, want.m, want.key)
		}
	}
	if _, _, err := newBinding(BindingConfig{Name: "AI", URL: "http://chat/v1"}).resolve("@cf/x"); err == nil || !strings.Contains(err.Error(), "no such model @cf/x") {
		t.Errorf("unmapped model: %v", err)
	}
	for secret, want := range map[string]string{
		`["a"]`:          `its Secret's key "models": want a JSON object`,
		`{"@cf/a": 3}`:   `"@cf/a": want a model name or`,
		`{"@cf/a": {}}`:  `"@cf/a": want a model name or`,
		`{"@cf/a": "m"}`: "",
	} {
		err := newBinding(BindingConfig{Name: "AI", URL: "http://chat/v1", SecretModels: secret}).configErr
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("models %s: %v, want %q", secret, err, want)
		}
	}
	if err := newBinding(BindingConfig{Name: "AI"}).configErr; err == nil || !strings.Contains(err.Error(), `key "url" is empty`) {
		t.Errorf("no url: %v", err)
	}
}

// TestRedirectNotFollowed: a server answering a redirect fails the call (502) and the
// gateway does not go where it points; the Secret names the server, not its redirects.
func TestRedirectNotFollowed(t *testing.T) {
	reached := false
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	defer target.Close()
	redirect := httptest.NewServer(http.RedirectHandler(target.URL+"/v1/chat/completions", http.StatusTemporaryRedirect))
	defer redirect.Close()
	g := New([]BindingConfig{{Name: "AI", URL: redirect.URL + "/v1", APIKey: "sk-secret", SecretModels: `{"*": "m"}`}}, Options{})
	req := httptest.NewRequest(http.MethodPost, "/run?version=3", strings.NewReader(`{"inputs": {"prompt": "hi"}, "options": {}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(podcontract.AIBindingHeader, "AI")
	req.Header.Set(modelHeader, "@cf/x")
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "307 Temporary Redirect") || reached {
		t.Errorf("status %d %s; redirect target reached: %v", rec.Code, rec.Body.String(), reached)
	}
}

// TestModelsListsNames: models() lists the mapped Cloudflare names, not the "*" default.
func TestModelsListsNames(t *testing.T) {
	g := New([]BindingConfig{{Name: "AI", URL: "http://chat/v1", SecretModels: `{"@cf/a": "a", "*": "any"}`}}, Options{})
	req := httptest.NewRequest(http.MethodGet, "/ai-api/models/search", nil)
	req.Header.Set(podcontract.AIBindingHeader, "AI")
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, `"name":"@cf/a"`) || strings.Contains(body, `"*"`) {
		t.Errorf("status %d: %s", rec.Code, body)
	}
}
