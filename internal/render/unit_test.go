package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

func baseWorker() *v1alpha1.Worker {
	return &v1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"},
		Spec: v1alpha1.WorkerSpec{
			CompatibilityDate: "2025-06-01",
			Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{
				{Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: ptr.To("export default {}")},
			}}},
		},
	}
}

func TestRenderErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Input)
		want   string
	}{
		{"no compat date", func(in *Input) { in.Worker.Spec.CompatibilityDate = "" }, "spec.compatibilityDate: required"},
		{"memory below 16", func(in *Input) { in.Worker.Spec.Limits = &v1alpha1.WorkerLimits{MemoryMiB: ptr.To[int32](8)} }, "spec.limits.memoryMiB: 8 is outside 16 to 4096"},
		{"two sources", func(in *Input) {
			in.Worker.Spec.Source.Image = &v1alpha1.ImageSource{Image: "x", Main: "a.js"}
		}, "spec.source: exactly one of inline, configMap or image"},
		{"bad base64", func(in *Input) {
			in.Worker.Spec.Source.Inline.Modules = append(in.Worker.Spec.Source.Inline.Modules,
				v1alpha1.Module{Name: "a.wasm", Type: v1alpha1.ModuleWasm, ContentBase64: ptr.To("!!")})
		}, "spec.source.inline.modules[1].contentBase64: invalid base64"},
		{"not wasm", func(in *Input) {
			in.Worker.Spec.Source.Inline.Modules = append(in.Worker.Spec.Source.Inline.Modules,
				v1alpha1.Module{Name: "a.wasm", Type: v1alpha1.ModuleWasm, ContentBase64: ptr.To("aGVsbG8gd29ybGQ=")})
		}, "spec.source.inline.modules[1]: Wasm module \"a.wasm\" does not start with the WebAssembly magic"},
		{"wasm as content", func(in *Input) {
			in.Worker.Spec.Source.Inline.Modules = append(in.Worker.Spec.Source.Inline.Modules,
				v1alpha1.Module{Name: "a.wasm", Type: v1alpha1.ModuleWasm, Content: ptr.To("x")})
		}, "spec.source.inline.modules[1].contentBase64: Wasm modules need contentBase64"},
		{"bad JSON module", func(in *Input) {
			in.Worker.Spec.Source.Inline.Modules = append(in.Worker.Spec.Source.Inline.Modules,
				v1alpha1.Module{Name: "a.json", Type: v1alpha1.ModuleJSON, Content: ptr.To("{")})
		}, "spec.source.inline.modules[1]: JSON module \"a.json\": invalid JSON"},
		{"dotdot module", func(in *Input) {
			in.Worker.Spec.Source.Inline.Modules = append(in.Worker.Spec.Source.Inline.Modules,
				v1alpha1.Module{Name: "a/../../etc", Type: v1alpha1.ModuleText, Content: ptr.To("x")})
		}, "spec.source.inline.modules[1].name: module name \"a/../../etc\" may not have"},
		{"duplicate module", func(in *Input) {
			in.Worker.Spec.Source.Inline.Modules = append(in.Worker.Spec.Source.Inline.Modules,
				v1alpha1.Module{Name: "worker.js", Type: v1alpha1.ModuleText, Content: ptr.To("x")})
		}, "spec.source.inline.modules[1].name: duplicate module name"},
		{"text main", func(in *Input) { in.Worker.Spec.Source.Inline.Modules[0].Type = v1alpha1.ModuleText }, "spec.source.inline.modules[0].type: the main module is Text"},
		{"duplicate binding", func(in *Input) {
			in.Worker.Spec.Bindings = []v1alpha1.Binding{{Name: "A", Text: ptr.To("1")}, {Name: "A", Text: ptr.To("2")}}
		}, "spec.bindings[1].name: duplicate binding \"A\""},
		{"two values", func(in *Input) {
			in.Worker.Spec.Bindings = []v1alpha1.Binding{{Name: "A", Text: ptr.To("1"), JSON: ptr.To("2")}}
		}, "spec.bindings[0]: exactly one of text, json"},
		{"unknown service", func(in *Input) {
			in.Worker.Spec.Bindings = []v1alpha1.Binding{{Name: "S", Service: &v1alpha1.ServiceBinding{Name: "other"}}}
		}, "spec.bindings[0].service.name: Worker \"other\" not found"},
		{"remote entrypoint", func(in *Input) {
			in.Services = map[string]ServiceTarget{"other": {Address: "127.0.0.1:1"}}
			in.Worker.Spec.Bindings = []v1alpha1.Binding{{Name: "S", Service: &v1alpha1.ServiceBinding{Name: "other", Entrypoint: "E"}}}
		}, "spec.bindings[0].service.entrypoint: named entrypoint \"E\" of another Worker is not supported yet"},
		{"secret without key", func(in *Input) {
			in.Worker.Spec.Bindings = []v1alpha1.Binding{{Name: "S", SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}
		}, "spec.bindings[0].secretKeyRef.key: required"},
		{"image modules not main first", func(in *Input) {
			in.Worker.Spec.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "x", Main: "a.js",
				Modules: []v1alpha1.ImageModule{{Name: "b.js", Type: v1alpha1.ModuleESModule}, {Name: "a.js", Type: v1alpha1.ModuleESModule}}}}
		}, "spec.source.image.modules[0].name: \"b.js\", want main \"a.js\""},
		{"image module duplicate", func(in *Input) {
			in.Worker.Spec.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "x", Main: "a.js",
				Modules: []v1alpha1.ImageModule{{Name: "a.js", Type: v1alpha1.ModuleESModule}, {Name: "a.js", Type: v1alpha1.ModuleText}}}}
		}, "spec.source.image.modules[1].name: duplicate module name \"a.js\""},
		{"image module dotdot", func(in *Input) {
			in.Worker.Spec.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "x", Main: "a.js",
				Modules: []v1alpha1.ImageModule{{Name: "a.js", Type: v1alpha1.ModuleESModule}, {Name: "x/../../b", Type: v1alpha1.ModuleText}}}}
		}, "spec.source.image.modules[1].name: module name \"x/../../b\" may not have"},
		{"image module bad type", func(in *Input) {
			in.Worker.Spec.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "x", Main: "a.js",
				Modules: []v1alpha1.ImageModule{{Name: "a.js", Type: v1alpha1.ModuleESModule}, {Name: "b.txt", Type: "Python"}}}}
		}, "spec.source.image.modules[1].type: \"Python\" is not one of"},
		{"image main text", func(in *Input) {
			in.Worker.Spec.Source = v1alpha1.WorkerSource{Image: &v1alpha1.ImageSource{Image: "x", Main: "a.txt",
				Modules: []v1alpha1.ImageModule{{Name: "a.txt", Type: v1alpha1.ModuleText}}}}
		}, "spec.source.image.modules[0].type: the main module is Text"},
		{"configMap missing", func(in *Input) {
			in.Worker.Spec.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "code", Main: "main.js"}}
		}, "spec.source.configMap.name: ConfigMap \"code\" not given"},
		{"configMap main missing", func(in *Input) {
			in.Worker.Spec.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "code", Main: "main.js"}}
			in.ConfigMap = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "code"}, Data: map[string]string{"x.js": ""}}
		}, "spec.source.configMap.main: ConfigMap \"code\" has no key \"main.js\""},
		{"configMap override unknown key", func(in *Input) {
			in.Worker.Spec.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "code", Main: "main.js",
				ModuleTypes: []v1alpha1.ModuleTypeOverride{{Key: "nope", Type: v1alpha1.ModuleText}}}}
			in.ConfigMap = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "code"}, Data: map[string]string{"main.js": ""}}
		}, "spec.source.configMap.moduleTypes[0].key: ConfigMap \"code\" has no key \"nope\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Worker: baseWorker()}
			c.mutate(&in)
			_, err := Render(in)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v, want prefix %q", err, c.want)
			}
		})
	}
}

// TestVersion: the version changes with what the pod runs and only with that.
func TestVersion(t *testing.T) {
	render := func(mutate func(*Input)) string {
		t.Helper()
		in := Input{Worker: baseWorker()}
		in.Worker.Spec.Bindings = []v1alpha1.Binding{{Name: "S", SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}
		if mutate != nil {
			mutate(&in)
		}
		out, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Version) != 16 {
			t.Fatalf("version %q: want 16 hex chars", out.Version)
		}
		return out.Version
	}
	base := render(nil)
	cases := []struct {
		name    string
		mutate  func(*Input)
		changes bool
	}{
		{"same input", func(*Input) {}, false},
		{"replicas", func(in *Input) { in.Worker.Spec.Replicas = ptr.To[int32](3) }, false},
		{"module content", func(in *Input) { in.Worker.Spec.Source.Inline.Modules[0].Content = ptr.To("export default {};") }, true},
		{"secret name", func(in *Input) { in.Worker.Spec.Bindings[0].SecretKeyRef.Name = "t" }, true},
		{"secret key", func(in *Input) { in.Worker.Spec.Bindings[0].SecretKeyRef.Key = "j" }, true},
		{"memory", func(in *Input) { in.Worker.Spec.Limits = &v1alpha1.WorkerLimits{MemoryMiB: ptr.To[int32](64)} }, true},
		{"flag order", func(in *Input) {
			in.Worker.Spec.CompatibilityFlags = []string{"b_flag", "a_flag"}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := render(c.mutate); (got != base) != c.changes {
				t.Fatalf("version %s vs base %s: changed=%v, want %v", got, base, got != base, c.changes)
			}
		})
	}
	// Flags are a set: order does not matter.
	a := render(func(in *Input) { in.Worker.Spec.CompatibilityFlags = []string{"b_flag", "a_flag"} })
	b := render(func(in *Input) { in.Worker.Spec.CompatibilityFlags = []string{"a_flag", "b_flag"} })
	if a != b {
		t.Fatalf("flag order changed the version: %s vs %s", a, b)
	}
}

func TestEnvAndArgs(t *testing.T) {
	in := Input{Worker: baseWorker()}
	in.Worker.Spec.Service = &v1alpha1.WorkerServiceSpec{Port: ptr.To[int32](8181)}
	in.Worker.Spec.Bindings = []v1alpha1.Binding{
		{Name: "ZED", SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "z"}},
		{Name: "ALPHA", SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "a"}},
	}
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Env) != 2 || out.Env[0].Name != "WORKERD_SECRET_ALPHA" || out.Env[1].Name != "WORKERD_SECRET_ZED" ||
		out.Env[0].ValueFrom.SecretKeyRef.Key != "a" || out.Env[0].Value != "" {
		t.Fatalf("env %+v", out.Env)
	}
	cfg := string(out.Files[0].Data)
	if out.Files[0].Path != podcontract.ConfigFile || !strings.Contains(cfg, `(name = "ALPHA", fromEnvironment = "WORKERD_SECRET_ALPHA")`) {
		t.Fatalf("config lacks the fromEnvironment binding:\n%s", cfg)
	}
	want := "serve --experimental /etc/workerd/config.capnp --socket-addr=http=$(POD_IP):8181 --socket-addr=rpc=127.0.0.1:9195 --socket-addr=health=$(POD_IP):9090 --socket-addr=trigger=127.0.0.1:9191 --external-addr=sidecar=127.0.0.1:9092 --external-addr=workerd-operator:cache=127.0.0.1:9092"
	if got := strings.Join(Args(in.Worker), " "); got != want {
		t.Fatalf("Args = %s\nwant    %s", got, want)
	}
	if got := ServiceAddress(in.Worker, Options{ClusterDomain: "example.internal"}); got != "w.ns.svc.example.internal:8181" {
		t.Fatalf("ServiceAddress = %s", got)
	}
	for _, f := range out.Files {
		if strings.Contains(f.Key, "/") {
			t.Errorf("file %s: key %q is not a valid ConfigMap key", f.Path, f.Key)
		}
	}
}

func TestQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", `"plain"`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"nl\ncr\rtab\t", `"nl\ncr\rtab\t"`},
		{"\x00\x1f\x7f", `"\x00\x1f\x7f"`},
		{"héllo ✓", `"héllo ✓"`},
	}
	for _, c := range cases {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestTypeForKey(t *testing.T) {
	cases := []struct {
		key    string
		binary bool
		want   v1alpha1.ModuleType
	}{
		{"a.js", false, v1alpha1.ModuleESModule},
		{"a.mjs", false, v1alpha1.ModuleESModule},
		{"a.cjs", false, v1alpha1.ModuleCommonJS},
		{"a.json", false, v1alpha1.ModuleJSON},
		{"a.wasm", true, v1alpha1.ModuleWasm},
		{"a.txt", false, v1alpha1.ModuleText},
		{"a.bin", true, v1alpha1.ModuleData},
	}
	for _, c := range cases {
		if got := TypeForKey(c.key, c.binary); got != c.want {
			t.Errorf("TypeForKey(%q, %v) = %s, want %s", c.key, c.binary, got, c.want)
		}
	}
}

// TestVersionConfigMap: a source.configMap Worker's version covers the ConfigMap's
// bytes (mounted as is, so not in Files) and its files hold only config and shims.
func TestVersionConfigMap(t *testing.T) {
	render := func(data map[string]string, bin map[string][]byte) *Output {
		t.Helper()
		w := baseWorker()
		w.Spec.Source = v1alpha1.WorkerSource{ConfigMap: &v1alpha1.ConfigMapSource{Name: "code", Main: "main.js"}}
		out, err := Render(Input{Worker: w, ConfigMap: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "code"}, Data: data, BinaryData: bin}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := render(map[string]string{"main.js": "export default {}"}, nil)
	cases := []struct {
		name string
		data map[string]string
		bin  map[string][]byte
	}{
		{"main changed", map[string]string{"main.js": "export default {};"}, nil},
		{"key added", map[string]string{"main.js": "export default {}", "x.txt": "x"}, nil},
		{"binary key added", map[string]string{"main.js": "export default {}"}, map[string][]byte{"b.bin": {1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if b := render(c.data, c.bin); b.Version == a.Version {
				t.Fatalf("version %s did not change", b.Version)
			}
		})
	}
	var paths []string
	for _, f := range a.Files {
		paths = append(paths, f.Path)
	}
	if got := strings.Join(paths, ","); got != "config.capnp,shim/health.js,shim/ingress.js,shim/tail.js,shim/trigger.js" {
		t.Fatalf("Files = %s, want config and shims only", got)
	}
	if len(a.External) != 1 || a.External[0].Path != "modules/main.js" || a.External[0].Key != "main.js" {
		t.Fatalf("External = %+v", a.External)
	}
}

// BenchmarkRender renders a Worker with 8 modules and 8 bindings.
func BenchmarkRender(b *testing.B) {
	w := baseWorker()
	for i := 0; i < 7; i++ {
		w.Spec.Source.Inline.Modules = append(w.Spec.Source.Inline.Modules, v1alpha1.Module{
			Name: "lib/m" + string(rune('a'+i)) + ".mjs", Type: v1alpha1.ModuleESModule,
			Content: ptr.To(strings.Repeat("export const x = 1;\n", 200))})
		w.Spec.Bindings = append(w.Spec.Bindings, v1alpha1.Binding{Name: "B" + string(rune('A'+i)), Text: ptr.To("value")})
	}
	w.Spec.Bindings = append(w.Spec.Bindings, v1alpha1.Binding{Name: "J", JSON: ptr.To(`{"a":[1,2,3]}`)})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Render(Input{Worker: w}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNoInvocationMetrics: the tail worker of the invocation metrics is every user
// Worker's streaming tail unless the operator turns it off (--invocation-metrics=false).
func TestNoInvocationMetrics(t *testing.T) {
	want := `streamingTails = ["` + podcontract.TailService + `"]`
	for _, off := range []bool{false, true} {
		out, err := Render(Input{Worker: baseWorker(), Options: Options{NoInvocationMetrics: off}})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(out.Files[0].Data), want); got == off {
			t.Errorf("NoInvocationMetrics %v: config has %s: %v", off, want, got)
		}
	}
}
