package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/deploy"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestDeployFlags: bad flags are refused before anything is built, naming the flag.
func TestDeployFlags(t *testing.T) {
	bin := buildCommand(t)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy", dir, "--dry-run"}, "--image REPO: required"},
		{[]string{"deploy", dir, "--dry-run", "--image", "localhost:5001/a:v1"}, "a repository without tag or digest"},
		{[]string{"deploy", dir, "--image", "localhost:5001/a"}, "no cluster to deploy to"},
		{[]string{"deploy", dir, "--dry-run", "--image", "localhost:5001/a", "--secrets-from", filepath.Join(dir, ".dev.vars")}, "--secrets-from"},
		{[]string{"deploy", dir, "--dry-run", "--image", "localhost:5001/a", "--dispatch-namespace", "Customers"}, `--dispatch-namespace "Customers": must be a DNS label`},
		{[]string{"deploy", dir, "--image", "localhost:5001/a", "--dispatch-namespace", "-x"}, "e.g. x (spec.dispatchNamespace; docs/dispatch.md)"},
	} {
		_, stderr, code := runCommand(t, bin, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestDeployDryRun: `deploy --dry-run` of a clean copy of hello-world-do-template runs
// its deploy script (wrangler deploy, made a dry run), applies nothing (there is no
// cluster) and prints its Worker, whose code is the image by digest, and its Durable
// Object namespace.
func TestDeployDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the template's dependencies with npm")
	}
	if _, err := deploy.NodeDir(); err != nil {
		t.Skip(err) // the pinned Node 22 and its npm (make tools, hack/install-node.sh)
	}
	bin := buildCommand(t)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	dir, err := testenv.CopyProject(testenv.SharedFile(t, "testdata", "cloudflare-templates", "hello-world-do-template"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCommand(t, bin, "deploy", dir, "--dry-run", "--image", "localhost:5001/hello")
	if code != 0 {
		t.Fatalf("deploy --dry-run: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"kind: Worker\nmetadata:\n  name: hello-world-do-template\n", "image: localhost:5001/hello@sha256:",
		"kind: DurableObjectNamespace\nmetadata:\n  name: hello-world-do-template-my-durable-object\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "status:") {
		t.Errorf("output carries a status:\n%s", stdout)
	}
	if !strings.Contains(stderr, "deploy: running npm run deploy") || !strings.Contains(stderr, "pushed: false") {
		t.Errorf("stderr lacks the deploy script or says it pushed:\n%s", stderr)
	}
}
