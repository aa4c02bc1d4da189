package wrangler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// viteProject is laid out as Cloudflare's Vite plugin leaves a built project: the
// user's config, the generated one in dist/<worker>/ (bookkeeping keys, every binding
// kind as an empty list, assets.directory filled in) and the redirect file
// (https://developers.cloudflare.com/workers/wrangler/configuration/#generated-wrangler-configuration).
func viteProject(extra string) map[string]string {
	return map[string]string{
		"wrangler.jsonc":               `{"name": "app", "main": "./worker/index.ts", "compatibility_date": "2025-04-01", "assets": {"not_found_handling": "single-page-application"}}`,
		".dev.vars":                    "API_TOKEN=x\n",
		".wrangler/deploy/config.json": `{"configPath": "../../dist/app/wrangler.json", "auxiliaryWorkers": []}`,
		"dist/app/wrangler.json": `{"configPath": "/build/machine/app/wrangler.jsonc", "userConfigPath": "/build/machine/app/wrangler.jsonc",
			"topLevelName": "app", "definedEnvironments": [], "legacy_env": true, "exports": ["default"], "cloudchamber": {},
			"name": "app", "main": "index.js", "compatibility_date": "2025-04-01", "no_bundle": true, "rules": [{"type": "ESModule", "globs": ["**/*.js"]}],
			"assets": {"directory": "../client", "not_found_handling": "single-page-application"},
			"vectorize": [], "ai": {}, "kv_namespaces": [], "dispatch_namespaces": [], "send_email": [],
			"ai_search": [], "worker_loaders": [], "logfwdr": {"bindings": []}, "queues": {"producers": [], "consumers": []}` + extra + `}`,
		"dist/app/index.js":      "export default { fetch() { return new Response('ok') } }",
		"dist/client/index.html": "<html></html>",
	}
}

func TestRedirectedConfig(t *testing.T) {
	cases := []struct {
		name, extra     string
		wantUnsupported string
	}{
		{name: "generated config"},
		{name: "unsupported binding still fails", extra: `, "analytics_engine_datasets": [{"binding": "A", "dataset": "d"}]`, wantUnsupported: "analytics_engine_datasets"},
		{name: "unknown binding kind in use fails", extra: `, "flagship": [{"binding": "F"}]`, wantUnsupported: "flagship"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, viteProject(tc.extra))
			cfg, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir, "dist/app/wrangler.json"); cfg.File != want || cfg.UserDir != dir || !cfg.Generated {
				t.Fatalf("Load: file %s user dir %s generated %v, want %s, %s, true", cfg.File, cfg.UserDir, cfg.Generated, want, dir)
			}
			res, err := Import(Options{Path: dir, Image: "r.example/app:1"})
			if tc.wantUnsupported != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantUnsupported) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantUnsupported)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.assetsDir, filepath.Join(dir, "dist/client"); got != want {
				t.Errorf("assets directory %s, want %s", got, want)
			}
			if res.Secret == "" || len(res.SecretKeys) != 1 || res.SecretKeys[0] != "API_TOKEN" {
				t.Errorf("secrets from the project's .dev.vars: %q %v", res.Secret, res.SecretKeys)
			}
			if m := res.Image.Modules; len(m) != 1 || m[0].Name != "index.js" {
				t.Errorf("modules %v, want the generated bundle index.js", m)
			}
		})
	}
}

func TestRedirectRefused(t *testing.T) {
	cases := map[string]map[string]string{
		"unknown key":              {"wrangler.json": `{}`, ".wrangler/deploy/config.json": `{"configPath": "x.json", "other": 1}`},
		"no configPath":            {"wrangler.json": `{}`, ".wrangler/deploy/config.json": `{"auxiliaryWorkers": []}`},
		"target missing":           {"wrangler.json": `{}`, ".wrangler/deploy/config.json": `{"configPath": "../../dist/w/wrangler.json"}`},
		"other project's redirect": {"app/wrangler.json": `{}`, ".wrangler/deploy/config.json": `{"configPath": "../../app/wrangler.json"}`},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, files)
			p := dir
			if _, ok := files["app/wrangler.json"]; ok {
				p = filepath.Join(dir, "app")
			}
			if _, err := Load(p); err == nil || !strings.Contains(err.Error(), ".wrangler") {
				t.Fatalf("err %v, want one naming the redirect file", err)
			}
		})
	}
}
