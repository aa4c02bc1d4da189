// Package wrangler reads a wrangler project (wrangler.json, wrangler.jsonc or
// wrangler.toml) and maps it to the operator's objects: a Worker, a
// DurableObjectNamespace per Durable Object class, a Workflow per workflow and a
// CronSchedule for its cron triggers. Every key it cannot map is reported with its
// path and the reason (docs/import.md); nothing here talks to Cloudflare or copies
// secret values.
package wrangler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// ConfigFiles are the file names a project directory is searched for, in wrangler's
// order of preference.
var ConfigFiles = []string{"wrangler.json", "wrangler.jsonc", "wrangler.toml"}

// Config is a parsed wrangler configuration.
type Config struct {
	// File is the configuration file; Dir its directory (the project).
	File, Dir string
	// Raw is the file's top level as decoded (JSON numbers as json.Number, TOML
	// values as the TOML decoder gives them).
	Raw map[string]any
}

// FindConfig returns the configuration file of path: path itself when it is a file,
// else the first of ConfigFiles in that directory.
func FindConfig(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return path, nil
	}
	for _, n := range ConfigFiles {
		p := filepath.Join(path, n)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: no %s", path, strings.Join(ConfigFiles, ", "))
}

// Load reads the configuration of path (a project directory or a config file).
func Load(path string) (*Config, error) {
	file, err := FindConfig(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	raw, err := decode(file, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &Config{File: file, Dir: filepath.Dir(file), Raw: raw}, nil
}

func decode(file string, data []byte) (map[string]any, error) {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".json", ".jsonc":
		return decodeJSONC(data)
	case ".toml":
		var m map[string]any
		if _, err := toml.Decode(string(data), &m); err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, errors.New("not a wrangler configuration (want .json, .jsonc or .toml)")
}

// nonInheritable are the keys an [env.X] section does not inherit from the top level
// (wrangler's "non-inheritable keys": bindings and vars are per environment).
var nonInheritable = map[string]bool{
	"vars": true, "define": true, "durable_objects": true, "workflows": true, "kv_namespaces": true,
	"r2_buckets": true, "d1_databases": true, "services": true, "queues": true, "secrets": true,
	"analytics_engine_datasets": true, "vectorize": true, "hyperdrive": true, "ai": true,
	"browser": true, "images": true, "send_email": true, "dispatch_namespaces": true,
	"mtls_certificates": true, "tail_consumers": true, "unsafe": true, "version_metadata": true,
	"pipelines": true, "secrets_store_secrets": true, "containers": true,
}

// Effective is the configuration one environment sees: each key with the path it
// came from ("vars" or "env.staging.vars").
type Effective struct {
	Values map[string]any
	Paths  map[string]string
	// Env is the selected environment, "" for the top level.
	Env string
}

// Environment applies the [env.NAME] overlay (wrangler's semantics: inheritable keys
// come from the top level unless the environment sets them; non-inheritable ones
// only from the environment; the name becomes "<name>-<env>" unless set). env ""
// is the top level.
func (c *Config) Environment(env string) (*Effective, error) {
	e := &Effective{Values: map[string]any{}, Paths: map[string]string{}, Env: env}
	for k, v := range c.Raw {
		if k == "env" || (env != "" && nonInheritable[k]) {
			continue
		}
		e.Values[k], e.Paths[k] = v, k
	}
	if env == "" {
		return e, nil
	}
	envs, _ := c.Raw["env"].(map[string]any)
	sec, ok := envs[env].(map[string]any)
	if !ok {
		names := make([]string, 0, len(envs))
		for n := range envs {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%s: no environment %q (env has: %s)", c.File, env, strings.Join(names, ", "))
	}
	if _, named := sec["name"]; !named {
		if n, ok := c.Raw["name"].(string); ok {
			e.Values["name"] = n + "-" + env
		}
	}
	for k, v := range sec {
		e.Values[k], e.Paths[k] = v, "env."+env+"."+k
	}
	return e, nil
}
