package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// TestImportDispatchNamespace: `import` maps dispatch_namespaces to dispatchNamespace
// bindings and --dispatch-namespace to spec.dispatchNamespace, and refuses what does not
// map, naming the field and docs/dispatch.md.
func TestImportDispatchNamespace(t *testing.T) {
	bin := buildCommand(t)
	project := func(name, extra string) string {
		dir := t.TempDir()
		cfg := `{"name": "` + name + `", "main": "index.js", "compatibility_date": "2025-01-01"` + extra + `}`
		for f, data := range map[string]string{"wrangler.jsonc": cfg, "index.js": "export default {}"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name, dir string
		args      []string
		// wantSpec is the Worker's spec.dispatchNamespace and bindings; wantErr are
		// substrings of stderr when import must fail.
		wantSpecNS   string
		wantBindings []v1alpha1.Binding
		wantErr      []string
	}{
		{name: "dispatcher", dir: project("dispatcher", `, "dispatch_namespaces": [{"binding": "DISPATCHER", "namespace": "customers", "remote": true}]`),
			wantBindings: []v1alpha1.Binding{{Name: "DISPATCHER", DispatchNamespace: &v1alpha1.DispatchNamespaceBinding{Namespace: "customers"}}}},
		{name: "user Worker", dir: project("customer-a", ""), args: []string{"--dispatch-namespace", "customers"},
			wantSpecNS: "customers"},
		{name: "outbound", dir: project("dispatcher", `, "dispatch_namespaces": [{"binding": "D", "namespace": "customers", "outbound": {"service": "o"}}]`),
			wantErr: []string{"dispatch_namespaces[0].outbound: outbound Workers", "not supported yet", "docs/dispatch.md"}},
		{name: "dispatch namespace not a DNS label", dir: project("customer-a", ""), args: []string{"--dispatch-namespace", "Customers_EU"},
			wantErr: []string{`--dispatch-namespace "Customers_EU": must be a DNS label`, "at most 63", "e.g. customers-eu", "docs/dispatch.md"}},
		{name: "user Worker name too long", dir: project(strings.Repeat("a", 51), ""), args: []string{"--dispatch-namespace", "customers"},
			wantErr: []string{"is 51 characters", "may be at most 50", "docs/dispatch.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCommand(t, bin, append([]string{"import", tc.dir}, tc.args...)...)
			if tc.wantErr != nil {
				if code != 1 {
					t.Fatalf("exit %d, want 1\n%s", code, stderr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, stderr)
					}
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			var w v1alpha1.Worker
			if err := yaml.UnmarshalStrict([]byte(stdout), &w); err != nil || w.Kind != "Worker" {
				t.Fatalf("stdout is not one Worker (%v):\n%s", err, stdout)
			}
			if w.Spec.DispatchNamespace != tc.wantSpecNS || !reflect.DeepEqual(w.Spec.Bindings, tc.wantBindings) {
				t.Errorf("spec.dispatchNamespace %q, bindings %+v; want %q, %+v", w.Spec.DispatchNamespace, w.Spec.Bindings, tc.wantSpecNS, tc.wantBindings)
			}
		})
	}
}
