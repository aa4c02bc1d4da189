package devcluster

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"POD_IP": "127.1.0.2", "EMPTY": ""}
	look := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"--socket-addr=http=$(POD_IP):8080", "--socket-addr=http=127.1.0.2:8080"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(POD_IP)", "$(POD_IP)"},
		{"a$(EMPTY)b", "ab"},
		{"$(unterminated", "$(unterminated"},
		{"$5", "$5"},
	} {
		if got := expand(tc.in, look); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRewriteArg(t *testing.T) {
	mounts := []pathMap{{"/etc/workerd/modules", "/h/mods"}, {"/etc/workerd", "/h/cfg"}, {"/var/lib/workerd/do", "/h/do"}}
	for _, tc := range []struct{ in, want string }{
		{"/etc/workerd/config.capnp", "/h/cfg/config.capnp"},
		{"/etc/workerd", "/h/cfg"},
		{"/etc/workerd/modules/a.js", "/h/mods/a.js"},
		{"--directory-path=do=/var/lib/workerd/do", "--directory-path=do=/h/do"},
		{"/etc/workerdx", "/etc/workerdx"},
		{"serve", "serve"},
	} {
		if got := rewriteArg(tc.in, mounts); got != tc.want {
			t.Errorf("rewriteArg(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStripTag(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ghcr.io/workerd-operator/workerd:1.20261117.1", "ghcr.io/workerd-operator/workerd"},
		{"localhost:5000/x@sha256:abc", "localhost:5000/x"},
		{"localhost:5000/x", "localhost:5000/x"},
	} {
		if got := stripTag(tc.in); got != tc.want {
			t.Errorf("stripTag(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestNestMounts: a volume mounted inside another (the modules ConfigMap at
// /etc/workerd/modules inside the config volume at /etc/workerd) is reachable through
// the outer volume's directory, as on a kubelet, so workerd's embeds relative to
// config.capnp find the modules (test/realnode shows the kubelet's behaviour).
func TestNestMounts(t *testing.T) {
	dir := t.TempDir()
	config, modules := filepath.Join(dir, "config"), filepath.Join(dir, "modules")
	for _, d := range []string{config, modules} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(modules, "index.js"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts := []pathMap{{from: "/etc/workerd/modules", to: modules}, {from: "/etc/workerd", to: config}, {from: "/tmp", to: filepath.Join(dir, "tmp")}}
	nestMounts(mounts)
	nestMounts(mounts) // idempotent across container restarts
	if b, err := os.ReadFile(filepath.Join(config, "modules", "index.js")); err != nil || string(b) != "x" {
		t.Fatalf("config/modules/index.js: %q, %v", b, err)
	}
	if got := rewritePath("/etc/workerd/modules/index.js", mounts); got != filepath.Join(modules, "index.js") {
		t.Errorf("rewritePath = %q", got)
	}
}

// TestLocalizeInstall: the manager's --outbound-default-allow points at this cluster's
// Pod and Service CIDRs (slot 1: 127.3.0.0/16 and 127.4.0.0/16); other args stay.
func TestLocalizeInstall(t *testing.T) {
	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "manager", "args": []any{"manager", OutboundDefaultFlag + "=public,10.96.0.0/12,10.244.0.0/16", "--leader-elect"}},
		}}}},
	}}
	c := &Cluster{slot: 1}
	if err := c.LocalizeInstall([]*unstructured.Unstructured{dep}); err != nil {
		t.Fatal(err)
	}
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	got := cs[0].(map[string]any)["args"]
	want := []any{"manager", OutboundDefaultFlag + "=public,127.3.0.0/16,127.4.0.0/16", "--leader-elect"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args %v, want %v", got, want)
	}
}
