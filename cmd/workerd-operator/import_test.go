package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestImportThenCheck runs `import` as users do on a project of the cloudflare/templates
// snapshot (with a stand-in for its wrangler bundle), then `render --check` on every
// file it wrote; and shows that a project with unsupported keys fails naming them.
func TestImportThenCheck(t *testing.T) {
	bin, workerd := buildCommand(t), testenv.WorkerdBinary(t)
	templates := testenv.SharedFile(t, "testdata", "cloudflare-templates")
	bundle := t.TempDir()
	src := `import { DurableObject } from "cloudflare:workers";
export class MyDurableObject extends DurableObject {
  async sayHello(name) { return "Hello, " + name + "!"; }
}
export default { async fetch(req, env) { return new Response(await env.MY_DURABLE_OBJECT.getByName("x").sayHello("world")); } };
`
	if err := os.WriteFile(filepath.Join(bundle, "index.js"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	_, stderr, code := runCommand(t, bin, "import", filepath.Join(templates, "hello-world-do-template"), "--bundle", bundle, "-o", out)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*-*.yaml"))
	args := []string{"render", "--check", "--workerd", workerd}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	_, stderr, code = runCommand(t, bin, args...)
	if code != 0 || !strings.Contains(stderr, "check default/hello-world-do-template: ok") ||
		!strings.Contains(stderr, "check default/hello-world-do-template-my-durable-object-do: ok") {
		t.Fatalf("render --check on %v: exit %d\n%s", files, code, stderr)
	}

	// d1-template: a D1Database with its migrations ConfigMap; its host pod starts too.
	d1 := t.TempDir()
	if _, stderr, code = runCommand(t, bin, "import", filepath.Join(templates, "d1-template"), "--bundle", bundle, "-o", d1); code != 0 {
		t.Fatalf("import d1-template: exit %d\n%s", code, stderr)
	}
	files, _ = filepath.Glob(filepath.Join(d1, "*-*.yaml"))
	args = []string{"render", "--check", "--workerd", workerd}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	_, stderr, code = runCommand(t, bin, args...)
	if code != 0 || !strings.Contains(stderr, "check default/d1-template-database-d1: ok") {
		t.Fatalf("render --check on %v: exit %d\n%s", files, code, stderr)
	}

	// r2-explorer-template: its r2_buckets become an R2Bucket on the given S3 endpoint.
	stdout, stderr, code := runCommand(t, bin, "import", filepath.Join(templates, "r2-explorer-template"), "--bundle", bundle,
		"--assets-image", "registry.example/r2:1", "--r2-endpoint", "http://s3.storage:7070")
	if code != 0 || !strings.Contains(stdout, "kind: R2Bucket") || !strings.Contains(stdout, "r2Bucket:") {
		t.Errorf("import r2-explorer-template: exit %d\n%s%s", code, stdout, stderr)
	}

	// A project with assets needs an image; with --assets-image it imports and checks.
	vite := filepath.Join(templates, "vite-react-template")
	_, stderr, code = runCommand(t, bin, "import", vite, "--bundle", bundle)
	if code != 1 || !strings.Contains(stderr, "--assets-image REF") {
		t.Errorf("import vite-react-template without an image: exit %d\n%s", code, stderr)
	}
	out = t.TempDir()
	_, stderr, code = runCommand(t, bin, "import", vite, "--bundle", bundle, "--assets-image", "registry.example/vite:1", "-o", out)
	if code != 0 {
		t.Fatalf("import vite-react-template: exit %d\n%s", code, stderr)
	}
	_, stderr, code = runCommand(t, bin, "render", "--check", "--workerd", workerd, "-f", filepath.Join(out, "worker-vite-react-template.yaml"))
	if code != 0 || !strings.Contains(stderr, "check default/vite-react-template: ok") {
		t.Errorf("render --check vite-react-template: exit %d\n%s", code, stderr)
	}
}
