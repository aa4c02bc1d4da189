package wrangler

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// dispatch_namespaces become dispatchNamespace bindings and --dispatch-namespace makes a
// user Worker
// (https://developers.cloudflare.com/cloudflare-for-platforms/workers-for-platforms/get-started/configuration/).
func TestDispatchNamespaces(t *testing.T) {
	jsonc := func(name, extra string) map[string]string {
		return map[string]string{
			"wrangler.jsonc": `{"name": "` + name + `", "main": "index.js", "compatibility_date": "2025-01-01"` + extra + `}`,
			"index.js":       "export default {}",
		}
	}
	long := strings.Repeat("a", render.MaxUserWorkerName)
	cases := []struct {
		name  string
		files map[string]string
		opts  Options
		// wantBindings maps binding name to dispatch namespace; wantSpecNS is
		// spec.dispatchNamespace.
		wantBindings map[string]string
		wantSpecNS   string
		// wantErr are substrings of Import's error; wantUnsupported the paths of an
		// *UnsupportedError (nil: none).
		wantErr         []string
		wantUnsupported []string
		wantNote        string
		wantAnnotation  string
	}{
		{name: "binding", files: jsonc("dispatcher", `, "dispatch_namespaces": [{"binding": "DISPATCHER", "namespace": "customers", "remote": true}]`),
			wantBindings: map[string]string{"DISPATCHER": "customers"}},
		{name: "two bindings in TOML", files: map[string]string{
			"wrangler.toml": "name = \"dispatcher\"\nmain = \"index.js\"\ncompatibility_date = \"2025-01-01\"\n" +
				"[[dispatch_namespaces]]\nbinding = \"PROD\"\nnamespace = \"prod\"\n[[dispatch_namespaces]]\nbinding = \"STAGING\"\nnamespace = \"staging\"\n",
			"index.js": "export default {}"},
			wantBindings: map[string]string{"PROD": "prod", "STAGING": "staging"}},
		{name: "namespace made a DNS label", files: jsonc("dispatcher", `, "dispatch_namespaces": [{"binding": "D", "namespace": "My_Customers"}]`),
			wantBindings: map[string]string{"D": "my-customers"},
			wantNote:     `dispatch_namespaces[0].namespace: "My_Customers" is not a DNS label, so the binding names dispatch namespace "my-customers": deploy its user Workers with --dispatch-namespace my-customers`},
		{name: "outbound refused", files: jsonc("dispatcher", `, "dispatch_namespaces": [{"binding": "D", "namespace": "customers", "outbound": {"service": "out"}}]`),
			wantErr:         []string{"dispatch_namespaces[0].outbound: outbound Workers", "are not supported yet", "docs/dispatch.md", "--allow-unsupported"},
			wantUnsupported: []string{"dispatch_namespaces[0].outbound"}},
		{name: "outbound in an environment refused", files: jsonc("dispatcher", `, "env": {"staging": {"dispatch_namespaces": [{"binding": "D", "namespace": "customers", "outbound": {"service": "out"}}]}}`),
			opts:            Options{Env: "staging"},
			wantErr:         []string{"env.staging.dispatch_namespaces[0].outbound: outbound Workers"},
			wantUnsupported: []string{"env.staging.dispatch_namespaces[0].outbound"}},
		{name: "outbound left out with --allow-unsupported", files: jsonc("dispatcher", `, "dispatch_namespaces": [{"binding": "D", "namespace": "customers", "outbound": {"service": "out"}}]`),
			opts:           Options{AllowUnsupported: true},
			wantBindings:   map[string]string{"D": "customers"},
			wantAnnotation: "dispatch_namespaces[0].outbound: outbound Workers (a Worker that sees every fetch() of the user Workers) are not supported yet; see docs/dispatch.md"},
		{name: "entry without namespace", files: jsonc("dispatcher", `, "dispatch_namespaces": [{"binding": "D"}]`),
			wantErr: []string{"dispatch_namespaces[0]: needs binding and namespace"}, wantUnsupported: []string{"dispatch_namespaces[0]"}},
		{name: "unknown key of an entry", files: jsonc("dispatcher", `, "dispatch_namespaces": [{"binding": "D", "namespace": "n", "experimental_x": 1}]`),
			wantUnsupported: []string{"dispatch_namespaces[0].experimental_x"}},
		{name: "user Worker", files: jsonc("customer-a", ""), opts: Options{DispatchNamespace: "customers"},
			wantSpecNS: "customers"},
		{name: "user Worker with the longest name", files: jsonc(long, ""), opts: Options{DispatchNamespace: "customers"},
			wantSpecNS: "customers"},
		{name: "user Worker name too long", files: jsonc(long+"b", ""), opts: Options{DispatchNamespace: "customers"},
			wantErr: []string{"--dispatch-namespace: Worker name \"" + long + "b\" is 51 characters", "at most 50", "wfp-<8 hex digits>-<name>", "docs/dispatch.md"}},
		{name: "user Worker name too long with its environment", files: jsonc(long[:43], `, "env": {"staging": {}}`),
			opts:    Options{Env: "staging", DispatchNamespace: "customers"},
			wantErr: []string{"Worker name \"" + long[:43] + "-staging\" is 51 characters", "at most 50"}},
		{name: "dispatch namespace not a DNS label", files: jsonc("customer-a", ""), opts: Options{DispatchNamespace: "Customers"},
			wantErr: []string{`--dispatch-namespace "Customers": must be a DNS label`, "at most 63", "e.g. customers", "spec.dispatchNamespace", "docs/dispatch.md"}},
		{name: "dispatch namespace too long", files: jsonc("customer-a", ""), opts: Options{DispatchNamespace: strings.Repeat("n", 64)},
			wantErr: []string{"must be a DNS label", "at most 63"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Path = writeProject(t, tc.files)
			res, err := Import(o)
			var ue *UnsupportedError
			if errors.As(err, &ue) {
				var paths []string
				for _, i := range ue.Issues {
					paths = append(paths, i.Path)
				}
				if !reflect.DeepEqual(paths, tc.wantUnsupported) {
					t.Errorf("unsupported %v, want %v", paths, tc.wantUnsupported)
				}
			} else if tc.wantUnsupported != nil {
				t.Errorf("err %v, want unsupported %v", err, tc.wantUnsupported)
			}
			if tc.wantErr != nil || tc.wantUnsupported != nil {
				for _, want := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("err %v, want one with %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkDispatchResult(t, res, tc.wantBindings, tc.wantSpecNS, tc.wantNote, tc.wantAnnotation)
		})
	}
}

func checkDispatchResult(t *testing.T, res *Result, bindings map[string]string, specNS, note, annotation string) {
	t.Helper()
	got := map[string]string{}
	for _, b := range res.Worker.Spec.Bindings {
		if b.Kind() != v1alpha1.BindingDispatchNamespace {
			t.Errorf("binding %s is a %q binding", b.Name, b.Kind())
			continue
		}
		got[b.Name] = b.DispatchNamespace.Namespace
	}
	if len(got) != 0 || len(bindings) != 0 {
		if !reflect.DeepEqual(got, bindings) {
			t.Errorf("dispatchNamespace bindings %v, want %v", got, bindings)
		}
	}
	if res.Worker.Spec.DispatchNamespace != specNS {
		t.Errorf("spec.dispatchNamespace %q, want %q", res.Worker.Spec.DispatchNamespace, specNS)
	}
	if note != "" && !strings.Contains(strings.Join(res.Notes, "\n"), note) {
		t.Errorf("notes %q lack %q", res.Notes, note)
	}
	if got := res.Worker.Annotations[UnsupportedAnnotation]; got != annotation {
		t.Errorf("annotation %q, want %q", got, annotation)
	}
}
