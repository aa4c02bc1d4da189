package wrangler

import (
	"fmt"
	"os"
	"path/filepath"
)

// DeployConfigRedirect is where a build tool (Cloudflare's Vite plugin, OpenNext)
// leaves the file pointing wrangler at the configuration it generated; wrangler looks
// for it from the working directory upward and follows its configPath, relative to
// the redirect file
// (https://developers.cloudflare.com/workers/wrangler/configuration/#generated-wrangler-configuration).
var DeployConfigRedirect = filepath.Join(".wrangler", "deploy", "config.json")

// generatedKeys are the bookkeeping keys a build tool writes into a generated
// configuration beside the user's own (wrangler reads them and deploys nothing from
// them): where the user's file is, the top-level name and environments it had, and
// the module's exports.
var generatedKeys = map[string]string{
	"configPath":          "generated configuration: the path of this file",
	"userConfigPath":      "generated configuration: the user's configuration file",
	"topLevelName":        "generated configuration: the top-level name of the user's configuration",
	"definedEnvironments": "generated configuration: the environments of the user's configuration",
	"targetEnvironment":   "generated configuration: the environment it was built for",
	"legacy_env":          "generated configuration: wrangler's environment mode",
	"exports":             "generated configuration: the names the entry module exports",
	"cloudchamber":        "Cloudflare's container scheduler settings",
	"jsx_factory":         "applied by the build tool that generated the configuration",
	"jsx_fragment":        "applied by the build tool that generated the configuration",
	"no_bundle":           "the build tool that generated the configuration already bundled",
	"rules":               "applied by the build tool that generated the configuration",
	"python_modules":      "generated configuration: Python module settings",
}

// redirectKeys are the keys Cloudflare's Vite plugin writes into the redirect file.
// wrangler deploy reads configPath only: the auxiliary Workers and the prerender
// Worker each have their own generated configuration, deployed on its own.
var redirectKeys = map[string]struct{}{"configPath": {}, "auxiliaryWorkers": {}, "prerenderWorkerConfigPath": {}}

// redirect is the file wrangler would read instead of user (the user's configuration
// file, "" when none): the target of the nearest DeployConfigRedirect from dir upward,
// or "" when there is none. As wrangler, it refuses a redirect that does not sit in
// the user configuration's own directory.
func redirect(dir, user string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		f := filepath.Join(d, DeployConfigRedirect)
		if _, err := os.Stat(f); err == nil {
			return followRedirect(f, user)
		}
		if filepath.Dir(d) == d {
			return "", nil
		}
	}
}

func followRedirect(file, user string) (string, error) {
	if user != "" {
		u, err := filepath.Abs(user)
		if err != nil {
			return "", err
		}
		if want := filepath.Join(filepath.Dir(u), DeployConfigRedirect); want != file {
			return "", fmt.Errorf("found the user configuration %s and the deploy configuration redirect %s, which are not in the same project: "+
				"it is not clear which to use (https://developers.cloudflare.com/workers/wrangler/configuration/#generated-wrangler-configuration)", user, file)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	m, err := decodeJSONC(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	target, ok := m["configPath"].(string)
	if !ok || target == "" {
		return "", fmt.Errorf("%s: configPath: required, the path of the generated wrangler.json "+
			"(https://developers.cloudflare.com/workers/wrangler/configuration/#generated-wrangler-configuration)", file)
	}
	for k := range m {
		if _, known := redirectKeys[k]; !known {
			return "", fmt.Errorf("%s: %s: not a key of a deploy configuration redirect (known: configPath, auxiliaryWorkers, prerenderWorkerConfigPath; "+
				"https://developers.cloudflare.com/workers/wrangler/configuration/#generated-wrangler-configuration)", file, k)
		}
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(file), target)
	}
	if _, err := os.Stat(target); err != nil {
		return "", fmt.Errorf("%s: configPath %s: %w (run the project's build again)", file, target, err)
	}
	return target, nil
}

// isEmptyList is true for [] and for a table holding nothing but empty lists and
// tables ({}, {"bindings": []}): a generated configuration lists every binding kind
// wrangler knows, most of them empty, and an empty one binds nothing whatever its kind.
func isEmptyList(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case []map[string]any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !isEmptyList(e) {
				return false
			}
		}
		return true
	}
	return false
}
