package packaging_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

const (
	healthFile     = "config/argocd/argocd-cm-health.yaml"
	expectedHealth = "test.workerd-operator.io/expected-health"
)

var fleetKinds = []string{"Worker", "DurableObjectNamespace", "Workflow", "CronSchedule", "KVNamespace", "D1Database", "Queue", "R2Bucket"}

// Ready=False reasons the health check reports as Progressing: they clear by themselves.
var transientReasons = []string{
	fleetv1alpha1.ReasonReconcileError,  // an API call failed; the reconcile is retried
	fleetv1alpha1.ReasonRollingOut,      // children being created or updated
	fleetv1alpha1.ReasonPodsUnavailable, // pods starting
	fleetv1alpha1.ReasonTargetNotReady,  // a CronSchedule's target has no ready pod yet
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// healthScripts returns the Lua health check of each kind, keyed by kind, read from the
// committed argocd-cm patch.
func healthScripts(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), healthFile))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind     string
		Metadata struct{ Name, Namespace string }
		Data     map[string]string
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatalf("%s: %v", healthFile, err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Name != "argocd-cm" {
		t.Fatalf("%s: %s %s, want the ConfigMap argocd-cm", healthFile, cm.Kind, cm.Metadata.Name)
	}
	out := map[string]string{}
	for _, k := range fleetKinds {
		key := "resource.customizations.health." + fleetv1alpha1.GroupVersion.Group + "_" + k
		s, ok := cm.Data[key]
		if !ok || strings.TrimSpace(s) == "" {
			t.Fatalf("%s: no %s", healthFile, key)
		}
		out[k] = s
	}
	return out
}

// health runs script as Argo CD does: the object as the global table obj, the script's
// returned table read for status and message.
func health(t *testing.T, script string, obj map[string]any) (status, message string) {
	t.Helper()
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("lua: %v", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("lua returned %s, want a table", L.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message"))
}

// toLua converts decoded JSON (maps, slices, float64/int64, strings, bools) into Lua values
// the way Argo CD hands objects to health scripts (arrays 1-based, numbers as numbers).
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		tb := L.NewTable()
		for k, e := range x {
			tb.RawSetString(k, toLua(L, e))
		}
		return tb
	case []any:
		tb := L.NewTable()
		for _, e := range x {
			tb.Append(toLua(L, e))
		}
		return tb
	case string:
		return lua.LString(x)
	case bool:
		return lua.LBool(x)
	case float64:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	case nil:
		return lua.LNil
	}
	panic(fmt.Sprintf("toLua: %T", v))
}

func withKind(obj map[string]any, kind string) map[string]any {
	b, _ := yaml.Marshal(obj)
	var c map[string]any
	_ = yaml.Unmarshal(b, &c)
	c["apiVersion"] = fleetv1alpha1.GroupVersion.String()
	c["kind"] = kind
	return c
}

// TestHealthFixtures runs the health check of each kind over every fixture.
func TestHealthFixtures(t *testing.T) {
	scripts := healthScripts(t)
	files, err := filepath.Glob("testdata/health/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want := obj["metadata"].(map[string]any)["annotations"].(map[string]any)[expectedHealth].(string)
		seen[want] = true
		for _, kind := range fleetKinds {
			t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml")+"/"+kind, func(t *testing.T) {
				got, msg := health(t, scripts[kind], withKind(obj, kind))
				if got != want {
					t.Errorf("health %s (%q), want %s", got, msg, want)
				}
			})
		}
	}
	for _, s := range []string{"Healthy", "Progressing", "Degraded", "Suspended"} {
		if !seen[s] {
			t.Errorf("no fixture expects %s", s)
		}
	}
}

// TestHealthOfEveryReason: Ready=False with each reason constant of api/v1alpha1 (read
// from conditions.go, so a new reason must be classified here) is Progressing for the
// transient ones, Suspended for Suspended, Degraded otherwise; the message carries it.
func TestHealthOfEveryReason(t *testing.T) {
	scripts := healthScripts(t)
	reasons := reasonConstants(t)
	for _, r := range transientReasons {
		if !slices.Contains(reasons, r) {
			t.Errorf("transient reason %s is not a constant of api/v1alpha1", r)
		}
	}
	for _, reason := range reasons {
		want := "Degraded"
		switch {
		case slices.Contains(transientReasons, reason):
			want = "Progressing"
		case reason == fleetv1alpha1.ReasonSuspended:
			want = "Suspended"
		}
		for _, kind := range fleetKinds {
			obj := map[string]any{
				"metadata": map[string]any{"name": "x", "generation": int64(7)},
				"status": map[string]any{"observedGeneration": int64(7), "conditions": []any{map[string]any{
					"type": fleetv1alpha1.ConditionReady, "status": "False", "reason": reason,
					"message": "because " + reason, "observedGeneration": int64(7)}}},
			}
			got, msg := health(t, scripts[kind], withKind(obj, kind))
			if got != want {
				t.Errorf("%s Ready=False %s: %s, want %s", kind, reason, got, want)
			}
			if want != "Suspended" && !strings.Contains(msg, reason) {
				t.Errorf("%s Ready=False %s: message %q does not name the reason", kind, reason, msg)
			}
		}
	}
}

// reasonConstants parses api/v1alpha1/conditions.go for the values of its Reason* constants.
func reasonConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot(t), "api/v1alpha1/conditions.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Reason") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					v, _ := strconv.Unquote(lit.Value)
					out = append(out, v)
				}
			}
		}
	}
	if len(out) < 5 {
		t.Fatalf("found only %d Reason constants in conditions.go", len(out))
	}
	return out
}

// TestApplication: the example Application applies server-side, renders the chart from
// its path, and its second source (kustomize) puts every custom resource in a later sync
// wave than the chart's objects (wave 0).
func TestApplication(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "config/argocd/application.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var app struct {
		Kind string
		Spec struct {
			Sources []struct {
				Path string
				Helm *struct{ ReleaseName string }
			}
			SyncPolicy struct{ SyncOptions []string }
		}
	}
	if err := yaml.Unmarshal(b, &app); err != nil {
		t.Fatal(err)
	}
	if app.Kind != "Application" {
		t.Fatalf("kind %q", app.Kind)
	}
	for _, want := range []string{"ServerSideApply=true", "SkipDryRunOnMissingResource=true"} {
		if !slices.Contains(app.Spec.SyncPolicy.SyncOptions, want) {
			t.Errorf("syncOptions %v lack %s", app.Spec.SyncPolicy.SyncOptions, want)
		}
	}
	if len(app.Spec.Sources) != 2 {
		t.Fatalf("%d sources, want the chart and the custom resources", len(app.Spec.Sources))
	}
	chartSrc, crSrc := app.Spec.Sources[0], app.Spec.Sources[1]
	if chartSrc.Helm == nil || chartSrc.Helm.ReleaseName != "workerd-operator" {
		t.Errorf("first source %+v: want the chart with releaseName workerd-operator (the webhook configurations' names)", chartSrc)
	}
	if _, err := os.Stat(filepath.Join(root, chartSrc.Path, "Chart.yaml")); err != nil {
		t.Errorf("first source path %s: %v", chartSrc.Path, err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, crSrc.Path))
	if err != nil {
		t.Fatalf("kustomize %s: %v", crSrc.Path, err)
	}
	if len(res.Resources()) == 0 {
		t.Fatalf("%s renders nothing", crSrc.Path)
	}
	for _, r := range res.Resources() {
		wave, err := strconv.Atoi(r.GetAnnotations()["argocd.argoproj.io/sync-wave"])
		if err != nil || wave < 1 {
			t.Errorf("%s %s: sync wave %q, want >= 1 (after the operator)", r.GetKind(), r.GetName(), r.GetAnnotations()["argocd.argoproj.io/sync-wave"])
		}
		if r.GetGvk().Group != fleetv1alpha1.GroupVersion.Group {
			t.Errorf("%s %s is not a custom resource of %s", r.GetKind(), r.GetName(), fleetv1alpha1.GroupVersion.Group)
		}
	}
}
