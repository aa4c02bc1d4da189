package wrangler

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// BundleHint is how to produce what --bundle takes.
const BundleHint = "bundle the project with `npx wrangler deploy --dry-run --outdir DIR` and pass --bundle DIR (docs/deploy.md)"

// moduleName is the pattern the API accepts for module names (api Module.name).
var moduleName = regexp.MustCompile(`^[A-Za-z0-9_@][A-Za-z0-9_.@/+-]*$`)

// module is file name with its bytes, typed by extension as source.configMap keys are
// (render.TypeForKey); bytes that are not UTF-8 count as binary.
func module(name string, data []byte) v1alpha1.Module {
	m := v1alpha1.Module{Name: name, Type: render.TypeForKey(name, !utf8.Valid(data))}
	if m.Type == v1alpha1.ModuleWasm || m.Type == v1alpha1.ModuleData {
		s := base64.StdEncoding.EncodeToString(data)
		m.ContentBase64 = &s
	} else {
		s := string(data)
		m.Content = &s
	}
	return m
}

// BundleModules turns every file under dir (a wrangler --outdir) into a module, the
// entry first: the JavaScript file named after main ("src/index.ts" → "index.js"),
// else the only JavaScript file at the top of dir. Source maps and the README.md
// wrangler writes there are skipped.
func BundleModules(dir, main string) ([]v1alpha1.Module, error) {
	var mods []v1alpha1.Module
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".map") {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "README.md" {
			return nil // wrangler's note on the directory (with a timestamp), not a module
		}
		if !moduleName.MatchString(rel) || strings.Contains(rel, "..") {
			return fmt.Errorf("--bundle %s: %s is not a valid module name (api Module.name)", dir, rel)
		}
		data, err := readUnder(dir, rel)
		if err != nil {
			return fmt.Errorf("--bundle %s: %w", dir, err)
		}
		mods = append(mods, module(rel, data))
		return nil
	})
	if err != nil {
		return nil, err
	}
	entry, err := bundleEntry(dir, main, mods)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(mods, func(i, j int) bool { return mods[i].Name == entry && mods[j].Name != entry })
	return mods, nil
}

func bundleEntry(dir, main string, mods []v1alpha1.Module) (string, error) {
	want := strings.TrimSuffix(path.Base(filepath.ToSlash(main)), path.Ext(main))
	var top []string
	for _, m := range mods {
		if strings.Contains(m.Name, "/") || (m.Type != v1alpha1.ModuleESModule && m.Type != v1alpha1.ModuleCommonJS) {
			continue
		}
		if main != "" && strings.TrimSuffix(m.Name, path.Ext(m.Name)) == want {
			return m.Name, nil
		}
		top = append(top, m.Name)
	}
	if len(top) == 1 {
		return top[0], nil
	}
	return "", fmt.Errorf("--bundle %s: cannot tell the entry module (want %s.js or a single JavaScript file at the top, found %s)", dir, want, strings.Join(top, ", "))
}

// importSpec matches the module specifiers of static and dynamic imports, re-exports
// and require calls.
var importSpec = regexp.MustCompile(`(?m)(?:\bimport\s*(?:[\w*${}\s,]+from\s*)?|\bexport\s*[\w*${}\s,]*from\s*|\bimport\s*\(\s*|\brequire\s*\(\s*)["']([^"']+)["']`)

// MainModule reads main (relative to the project dir) as the only module. It must be
// JavaScript that imports nothing but runtime modules (cloudflare:, node:, workerd:);
// anything else needs a bundle, and the error says how to make one.
func MainModule(dir, main string) (v1alpha1.Module, error) {
	if main == "" {
		return v1alpha1.Module{}, fmt.Errorf("main is not set (a project without main must have assets: an assets-only Worker)")
	}
	ext := strings.ToLower(filepath.Ext(main))
	if ext != ".js" && ext != ".mjs" && ext != ".cjs" {
		return v1alpha1.Module{}, fmt.Errorf("main %s is not JavaScript (%s): %s", main, ext, BundleHint)
	}
	data, err := os.ReadFile(filepath.Join(dir, main))
	if os.IsNotExist(err) {
		return v1alpha1.Module{}, fmt.Errorf("main %s does not exist (build the project first?): %s", main, BundleHint)
	}
	if err != nil {
		return v1alpha1.Module{}, err
	}
	for _, m := range importSpec.FindAllSubmatch(data, -1) {
		spec := string(m[1])
		if !strings.HasPrefix(spec, "cloudflare:") && !strings.HasPrefix(spec, "node:") && !strings.HasPrefix(spec, "workerd:") {
			return v1alpha1.Module{}, fmt.Errorf("main %s imports %q, so it is not self-contained: %s", main, spec, BundleHint)
		}
	}
	return module(filepath.Base(main), data), nil
}
