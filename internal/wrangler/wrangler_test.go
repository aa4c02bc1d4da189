package wrangler

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

func TestDecodeJSONC(t *testing.T) {
	in := `// a comment
{
	"name": "a // not a comment", /* block
	comment */ "url": "http://x/*y*/",
	"esc": "quote \" // still a string",
	"list": [1, 2, ],
	"obj": {"k": "v",},
}
`
	got, err := decodeJSONC([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got["name"] != "a // not a comment" || got["url"] != "http://x/*y*/" || got["esc"] != `quote " // still a string` {
		t.Errorf("strings changed: %v", got)
	}
	if l, _ := got["list"].([]any); len(l) != 2 {
		t.Errorf("list %v", got["list"])
	}
	if _, err := decodeJSONC([]byte(`{"a": 1 /* open`)); err == nil {
		t.Error("unterminated comment accepted")
	}
}

func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const tomlProject = `
name = "shop"
main = "worker.js"
compatibility_date = "2025-06-01"
compatibility_flags = ["nodejs_compat"]
routes = ["example.com/*"]

[vars]
GREETING = "hi"
SETTINGS = { region = "eu", n = 3 }

[[hyperdrive]]
binding = "DB"
id = "0123456789abcdef0123456789abcdef"
localConnectionString = "postgres://me:local-pw@localhost:5432/shop"

[ai]
binding = "AI"

[[services]]
binding = "AUTH"
service = "auth-worker"
entrypoint = "Checker"

[[tail_consumers]]
service = "Log-Shipper"

[[durable_objects.bindings]]
name = "CARTS"
class_name = "ShoppingCart"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["ShoppingCart"]

[[workflows]]
name = "orders"
binding = "ORDERS"
class_name = "OrderWorkflow"

[triggers]
crons = ["0 * * * *"]

[limits]
cpu_ms = 100

[env.staging]
compatibility_date = "2025-07-01"
[env.staging.vars]
GREETING = "hi from staging"
`

// TestTOMLProject maps every supported key of a TOML project and lists the rest.
func TestTOMLProject(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.toml": tomlProject,
		"worker.js":     "import { DurableObject } from \"cloudflare:workers\";\nexport class ShoppingCart extends DurableObject {}\nexport default { fetch() { return new Response('ok') } };\n",
		".dev.vars":     "# local secrets\nAPI_KEY=secret-value\nexport TOKEN=\"x\"\n",
	})
	_, err := Import(Options{Path: dir})
	var ue *UnsupportedError
	if !errors.As(err, &ue) || len(ue.Issues) != 1 || ue.Issues[0].Path != "routes" {
		t.Fatalf("want routes unsupported, got %v", err)
	}
	res, err := Import(Options{Path: dir, AllowUnsupported: true, Namespace: "apps"})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Worker
	if w.Name != "shop" || w.Namespace != "apps" || w.Spec.CompatibilityDate != "2025-06-01" || w.Annotations[UnsupportedAnnotation] != "routes: "+unsupportedKeys["routes"] {
		t.Errorf("worker meta %+v", w.ObjectMeta)
	}
	got := map[string]string{}
	for _, b := range w.Spec.Bindings {
		kind, ref := b.Reference()
		v, _ := b.Value()
		got[b.Name] = string(b.Kind()) + " " + kind + " " + ref + v
	}
	want := map[string]string{
		"GREETING": "text  hi", "SETTINGS": `json  {"n":3,"region":"eu"}`,
		"AUTH": "service Worker auth-worker", "CARTS": "durableObjectNamespace DurableObjectNamespace shop-shopping-cart",
		"ORDERS": "workflow Workflow orders", "API_KEY": "secretKeyRef Secret shop-secrets", "TOKEN": "secretKeyRef Secret shop-secrets",
		"DB": "hyperdrive Secret shop-db", "AI": "ai Secret workers-ai",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bindings\n got %v\nwant %v", got, want)
	}
	if d := res.DurableObjectNamespaces; len(d) != 1 || !d[0].Spec.SQL || d[0].Spec.ClassName != "ShoppingCart" || d[0].Spec.WorkerRef.Name != "shop" || d[0].Namespace != "apps" {
		t.Errorf("durable object namespaces %+v", d)
	}
	if wf := res.Workflows; len(wf) != 1 || wf[0].Name != "orders" || wf[0].Spec.ClassName != "OrderWorkflow" {
		t.Errorf("workflows %+v", wf)
	}
	if c := res.CronSchedules; len(c) != 1 || c[0].Spec.Schedules[0] != "0 * * * *" || c[0].Spec.Target.WorkerRef.Name != "shop" {
		t.Errorf("cron schedules %+v", c)
	}
	// tail_consumers: https://developers.cloudflare.com/workers/observability/logs/tail-workers/
	if !reflect.DeepEqual(w.Spec.Tails, []v1alpha1.TailConsumer{{Service: "log-shipper"}}) {
		t.Errorf("tails %+v", w.Spec.Tails)
	}
	if w.Spec.Limits == nil || *w.Spec.Limits.CPUMs != 100 {
		t.Errorf("limits %+v", w.Spec.Limits)
	}
	for _, b := range w.Spec.Bindings {
		if b.Service != nil && b.Service.Entrypoint != "Checker" {
			t.Errorf("service binding entrypoint %q", b.Service.Entrypoint)
		}
	}
	var yaml strings.Builder
	if err := res.WriteYAML(&yaml); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(yaml.String(), "secret-value") || strings.Contains(yaml.String(), "local-pw") || strings.Contains(yaml.String(), "status:") {
		t.Errorf("YAML holds a secret value or a status:\n%s", yaml.String())
	}
}

// TestEnvironmentOverlay: [env.staging] inherits main and flags, replaces vars and
// drops the top level's bindings (wrangler's non-inheritable keys).
func TestEnvironmentOverlay(t *testing.T) {
	dir := writeProject(t, map[string]string{"wrangler.toml": tomlProject, "worker.js": "export default {};\n"})
	res, err := Import(Options{Path: dir, Env: "staging", AllowUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Worker
	if w.Name != "shop-staging" || w.Spec.CompatibilityDate != "2025-07-01" || len(w.Spec.CompatibilityFlags) != 1 {
		t.Errorf("worker %s %+v", w.Name, w.Spec)
	}
	if len(w.Spec.Bindings) != 1 || *w.Spec.Bindings[0].Text != "hi from staging" || len(res.DurableObjectNamespaces) != 0 {
		t.Errorf("bindings %+v, namespaces %d", w.Spec.Bindings, len(res.DurableObjectNamespaces))
	}
	if _, err := Import(Options{Path: dir, Env: "prod"}); err == nil || !strings.Contains(err.Error(), `no environment "prod" (env has: staging)`) {
		t.Errorf("unknown env: %v", err)
	}
}

// TestCode: main must be self-contained JavaScript unless --bundle gives the modules.
func TestCode(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.jsonc":    `{"name": "x", "main": "src/index.js", "compatibility_date": "2025-06-01", "migrations": [{"tag": "v2", "renamed_classes": [{"from": "A", "to": "B"}]}]}`,
		"src/index.js":      "import { helper } from './helper.js';\nexport default { fetch: helper };\n",
		"dist/index.js":     "import './chunk/a.js';\nexport default {};\n",
		"dist/chunk/a.js":   "export const a = 1;\n",
		"dist/index.js.map": "{}",
		"dist/data.bin":     "\xff\xfe",
	})
	_, err := Import(Options{Path: dir, AllowUnsupported: true})
	if err == nil || !strings.Contains(err.Error(), `imports "./helper.js", so it is not self-contained`) || !strings.Contains(err.Error(), "--bundle") {
		t.Errorf("not self-contained: %v", err)
	}
	res, err := Import(Options{Path: dir, Bundle: filepath.Join(dir, "dist"), AllowUnsupported: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range res.Worker.Spec.Source.Inline.Modules {
		names = append(names, m.Name+":"+string(m.Type))
	}
	if strings.Join(names, " ") != "index.js:ESModule chunk/a.js:ESModule data.bin:Data" {
		t.Errorf("modules %v", names)
	}
	if got := res.Worker.Annotations[UnsupportedAnnotation]; !strings.HasPrefix(got, "migrations[0].renamed_classes: ") {
		t.Errorf("annotation %q", got)
	}
	if _, err := MainModule(dir, "src/index.ts"); err == nil || !strings.Contains(err.Error(), "is not JavaScript") {
		t.Errorf("TypeScript main: %v", err)
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{"MyDurableObject": "my-durable-object", "HTTPServer": "http-server", "Counter2Go": "counter2-go"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
	if got := dnsName("My_Worker!"); got != "my-worker" {
		t.Errorf("dnsName = %q", got)
	}
	if got := dnsName(strings.Repeat("a", 80)); len(got) != maxName {
		t.Errorf("long name %q (%d)", got, len(got))
	}
}
