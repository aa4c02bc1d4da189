package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// module is one module of the user's Worker, resolved.
type module struct {
	name  string
	typ   v1alpha1.ModuleType
	data  []byte
	field string // the spec field it came from, for errors
}

// source is the user's code, resolved from spec.source: the modules in config order
// (main first) and the files the pod gets from elsewhere (a mounted ConfigMap).
type source struct {
	modules  []module
	external []File
	// inline: the modules' bytes are rendered files (Output.Files).
	inline bool
}

// resolveSource resolves spec.source: inline modules, a ConfigMap's keys, or the
// modules an image source lists.
func resolveSource(in Input) (*source, error) {
	src := in.Worker.Spec.Source
	n := 0
	for _, set := range []bool{src.Inline != nil, src.ConfigMap != nil, src.Image != nil} {
		if set {
			n++
		}
	}
	if n == 0 && in.Worker.Spec.Assets != nil {
		return &source{}, nil // an assets-only Worker: no code (assets.go)
	}
	if n != 1 {
		return nil, fmt.Errorf("spec.source: exactly one of inline, configMap or image must be set (got %d)", n)
	}
	switch {
	case src.Inline != nil:
		mods, err := inlineModules(src.Inline)
		return &source{modules: mods, inline: true}, err
	case src.ConfigMap != nil:
		return configMapModules(src.ConfigMap, in.ConfigMap)
	}
	return imageModules(src.Image)
}

// imageModules are spec.source.image.modules (main first), or main alone as an ES
// module: the renderer cannot list the image's files, so the spec names them.
func imageModules(src *v1alpha1.ImageSource) (*source, error) {
	if err := checkModuleName("spec.source.image.main", src.Main); err != nil {
		return nil, err
	}
	if len(src.Modules) == 0 {
		return &source{modules: []module{{name: src.Main, typ: v1alpha1.ModuleESModule, field: "spec.source.image.main"}}}, nil
	}
	if src.Modules[0].Name != src.Main {
		return nil, fmt.Errorf("spec.source.image.modules[0].name: %q, want main %q (the entry module comes first)", src.Modules[0].Name, src.Main)
	}
	seen := map[string]bool{}
	mods := make([]module, 0, len(src.Modules))
	for i, m := range src.Modules {
		field := fmt.Sprintf("spec.source.image.modules[%d]", i)
		if err := checkModuleName(field+".name", m.Name); err != nil {
			return nil, err
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("%s.name: duplicate module name %q", field, m.Name)
		}
		seen[m.Name] = true
		if !validType(m.Type) {
			return nil, fmt.Errorf("%s.type: %q is not one of ESModule, CommonJS, Text, Data, Wasm, JSON", field, m.Type)
		}
		mods = append(mods, module{name: m.Name, typ: m.Type, field: field})
	}
	if t := mods[0].typ; !isMainType(t) {
		return nil, fmt.Errorf("spec.source.image.modules[0].type: the main module is %s; it must be ESModule or CommonJS", t)
	}
	return &source{modules: mods}, nil
}

// inlineModules are spec.source.inline.modules: the main module first (spec order),
// the rest by name.
func inlineModules(src *v1alpha1.InlineSource) ([]module, error) {
	if len(src.Modules) == 0 {
		return nil, fmt.Errorf("spec.source.inline.modules: at least one module is required (the first is the main module)")
	}
	seen := map[string]string{}
	var modules []module
	for i, m := range src.Modules {
		field := fmt.Sprintf("spec.source.inline.modules[%d]", i)
		if err := checkModuleName(field+".name", m.Name); err != nil {
			return nil, err
		}
		if prev, dup := seen[m.Name]; dup {
			return nil, fmt.Errorf("%s.name: duplicate module name %q (also %s)", field, m.Name, prev)
		}
		seen[m.Name] = field
		mod, err := inlineModule(field, m)
		if err != nil {
			return nil, err
		}
		modules = append(modules, mod)
	}
	rest := modules[1:]
	sort.Slice(rest, func(i, j int) bool { return rest[i].name < rest[j].name })
	if t := modules[0].typ; !isMainType(t) {
		return nil, fmt.Errorf("spec.source.inline.modules[0].type: the main module is %s; it must be ESModule or CommonJS", t)
	}
	return modules, nil
}

// inlineModule decodes one inline module (at field) and checks its type and bytes.
func inlineModule(field string, m v1alpha1.Module) (module, error) {
	if !validType(m.Type) {
		return module{}, fmt.Errorf("%s.type: %q is not one of ESModule, CommonJS, Text, Data, Wasm, JSON", field, m.Type)
	}
	var data []byte
	switch {
	case m.Content != nil && m.ContentBase64 != nil:
		return module{}, fmt.Errorf("%s: exactly one of content or contentBase64 must be set", field)
	case m.Content != nil:
		if !isTextType(m.Type) {
			return module{}, fmt.Errorf("%s.contentBase64: %s modules need contentBase64", field, m.Type)
		}
		data = []byte(*m.Content)
	case m.ContentBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*m.ContentBase64)
		if err != nil {
			return module{}, fmt.Errorf("%s.contentBase64: invalid base64: %v", field, err)
		}
		data = b
	default:
		return module{}, fmt.Errorf("%s: exactly one of content or contentBase64 must be set", field)
	}
	mod := module{name: m.Name, typ: m.Type, data: data, field: field}
	return mod, checkModuleData(mod)
}

// cmEntry is one key of a ConfigMap, from data or binaryData.
type cmEntry struct {
	key    string
	data   []byte
	binary bool
}

// configMapModules makes one module per key of cm (spec.source.configMap cs), the main
// key first, then the rest by key; cm is mounted as is, so its keys are External files.
func configMapModules(cs *v1alpha1.ConfigMapSource, cm *corev1.ConfigMap) (*source, error) {
	if cm == nil {
		return nil, fmt.Errorf("spec.source.configMap.name: ConfigMap %q not given to the renderer", cs.Name)
	}
	if cm.Name != cs.Name {
		return nil, fmt.Errorf("spec.source.configMap.name: want ConfigMap %q, got %q", cs.Name, cm.Name)
	}
	overrides, err := moduleTypeOverrides(cs, cm)
	if err != nil {
		return nil, err
	}
	entries, err := configMapEntries(cs, cm)
	if err != nil {
		return nil, err
	}
	src := &source{}
	for _, e := range entries {
		field := fmt.Sprintf("configMap %s key %q", cm.Name, e.key)
		if err := checkModuleName(field, e.key); err != nil {
			return nil, err
		}
		t, ok := overrides[e.key]
		if !ok {
			t = TypeForKey(e.key, e.binary)
		}
		mod := module{name: e.key, typ: t, data: e.data, field: field}
		if err := checkModuleData(mod); err != nil {
			return nil, err
		}
		src.modules = append(src.modules, mod)
		src.external = append(src.external, File{Key: e.key, Path: podcontract.ModulesSubdir + "/" + e.key, Data: e.data, Binary: e.binary})
	}
	if t := src.modules[0].typ; !isMainType(t) {
		return nil, fmt.Errorf("spec.source.configMap.main: main module %q is %s; it must be ESModule or CommonJS", cs.Main, t)
	}
	return src, nil
}

// moduleTypeOverrides checks spec.source.configMap.moduleTypes against cm.
func moduleTypeOverrides(cs *v1alpha1.ConfigMapSource, cm *corev1.ConfigMap) (map[string]v1alpha1.ModuleType, error) {
	overrides := map[string]v1alpha1.ModuleType{}
	for i, o := range cs.ModuleTypes {
		if !validType(o.Type) {
			return nil, fmt.Errorf("spec.source.configMap.moduleTypes[%d].type: %q is not one of ESModule, CommonJS, Text, Data, Wasm, JSON", i, o.Type)
		}
		if !hasKey(cm, o.Key) {
			return nil, fmt.Errorf("spec.source.configMap.moduleTypes[%d].key: ConfigMap %q has no key %q", i, cm.Name, o.Key)
		}
		overrides[o.Key] = o.Type
	}
	return overrides, nil
}

func hasKey(cm *corev1.ConfigMap, key string) bool {
	_, inData := cm.Data[key]
	_, inBinary := cm.BinaryData[key]
	return inData || inBinary
}

// configMapEntries are cm's keys, the main key (cs.Main) first, then the rest by key.
func configMapEntries(cs *v1alpha1.ConfigMapSource, cm *corev1.ConfigMap) ([]cmEntry, error) {
	var entries []cmEntry
	for k, v := range cm.Data {
		entries = append(entries, cmEntry{k, []byte(v), false})
	}
	for k, v := range cm.BinaryData {
		if _, dup := cm.Data[k]; dup {
			return nil, fmt.Errorf("configMap %s: key %q is in both data and binaryData", cm.Name, k)
		}
		entries = append(entries, cmEntry{k, v, true})
	}
	if !hasKey(cm, cs.Main) {
		return nil, fmt.Errorf("spec.source.configMap.main: ConfigMap %q has no key %q", cm.Name, cs.Main)
	}
	sort.Slice(entries, func(i, j int) bool {
		if (entries[i].key == cs.Main) != (entries[j].key == cs.Main) {
			return entries[i].key == cs.Main
		}
		return entries[i].key < entries[j].key
	})
	return entries, nil
}

var moduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_@][A-Za-z0-9_.@/+-]*$`)

func checkModuleName(field, name string) error {
	if len(name) == 0 || len(name) > 253 {
		return fmt.Errorf("%s: module name %q must be 1 to 253 characters (api Module.name)", field, name)
	}
	if !moduleNameRE.MatchString(name) {
		return fmt.Errorf("%s: module name %q must match %s (api Module.name)", field, name, moduleNameRE)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return fmt.Errorf("%s: module name %q may not have empty, \".\" or \"..\" segments (api Module.name)", field, name)
		}
	}
	return nil
}

// TypeForKey is the module type of a ConfigMap key by extension (api ConfigMapSource):
// .js/.mjs ESModule, .cjs CommonJS, .json JSON, .wasm Wasm, other data keys Text,
// other binaryData keys Data.
func TypeForKey(key string, binaryData bool) v1alpha1.ModuleType {
	switch strings.ToLower(path.Ext(key)) {
	case ".js", ".mjs":
		return v1alpha1.ModuleESModule
	case ".cjs":
		return v1alpha1.ModuleCommonJS
	case ".json":
		return v1alpha1.ModuleJSON
	case ".wasm":
		return v1alpha1.ModuleWasm
	}
	if binaryData {
		return v1alpha1.ModuleData
	}
	return v1alpha1.ModuleText
}

// capnpModuleFields maps a module type to its field in workerd's Worker.Module union.
var capnpModuleFields = map[v1alpha1.ModuleType]string{
	v1alpha1.ModuleESModule: "esModule",
	v1alpha1.ModuleCommonJS: "commonJsModule",
	v1alpha1.ModuleText:     "text",
	v1alpha1.ModuleData:     "data",
	v1alpha1.ModuleWasm:     "wasm",
	v1alpha1.ModuleJSON:     "json",
}

func validType(t v1alpha1.ModuleType) bool {
	_, ok := capnpModuleFields[t]
	return ok
}

func isMainType(t v1alpha1.ModuleType) bool {
	return t == v1alpha1.ModuleESModule || t == v1alpha1.ModuleCommonJS
}

func isTextType(t v1alpha1.ModuleType) bool {
	return t != v1alpha1.ModuleData && t != v1alpha1.ModuleWasm
}

func checkModuleData(m module) error {
	if isTextType(m.typ) && !utf8.Valid(m.data) {
		return fmt.Errorf("%s: %s module %q is not valid UTF-8", m.field, m.typ, m.name)
	}
	if m.typ == v1alpha1.ModuleJSON && !json.Valid(m.data) {
		var v any
		err := json.Unmarshal(m.data, &v)
		return fmt.Errorf("%s: JSON module %q: invalid JSON: %v", m.field, m.name, err)
	}
	if m.typ == v1alpha1.ModuleWasm && (len(m.data) < 8 || !bytes.Equal(m.data[:4], []byte("\x00asm"))) {
		return fmt.Errorf("%s: Wasm module %q does not start with the WebAssembly magic \\0asm", m.field, m.name)
	}
	return nil
}
