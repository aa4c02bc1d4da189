package deploy

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestPlan: the build script runs first unless the deploy script runs it, then the
// deploy script, else `npx wrangler deploy`, as Workers Builds runs the build command
// then the deploy command (https://developers.cloudflare.com/workers/ci-cd/builds/configuration/).
// The scripts are those of ../shared/testdata/cloudflare-templates and of
// create-cloudflare's React template.
func TestPlan(t *testing.T) {
	build, deploy, npx := Step{"npm", "run", "build"}, Step{"npm", "run", "deploy"}, Step{"npx", "wrangler", "deploy"}
	for _, tc := range []struct {
		name    string
		scripts map[string]string
		want    []Step
	}{
		{"deploy only (hello-world-do)", map[string]string{"deploy": "wrangler deploy", "dev": "wrangler dev"}, []Step{deploy}},
		{"build and deploy (astro-blog)", map[string]string{"build": "astro build", "deploy": "wrangler deploy"}, []Step{build, deploy}},
		{"deploy runs the build (create-cloudflare react)", map[string]string{"build": "tsc -b && vite build", "deploy": "npm run build && wrangler deploy"}, []Step{deploy}},
		{"deploy holds the build command", map[string]string{"build": "remix vite:build", "deploy": "remix vite:build && wrangler deploy"}, []Step{deploy}},
		{"pnpm build in deploy", map[string]string{"build": "vite build", "deploy": "pnpm build && wrangler deploy"}, []Step{deploy}},
		{"no deploy script", map[string]string{"build": "vite build"}, []Step{build, npx}},
		{"no scripts", nil, []Step{npx}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Plan(tc.scripts); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan(%v) = %v, want %v", tc.scripts, got, tc.want)
			}
		})
	}
}

// TestFlagValue: wrangler (yargs) takes `--config FILE`, `--config=FILE`, `-c FILE`, and
// the last of repeated flags.
func TestFlagValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy", "--config", "a.jsonc"}, "a.jsonc"},
		{[]string{"deploy", "--config=b.toml", "--dry-run"}, "b.toml"},
		{[]string{"deploy", "-c", "c.json"}, "c.json"},
		{[]string{"deploy", "-c", "x.json", "--config", "y.json"}, "y.json"},
		{[]string{"deploy", "--dry-run"}, ""},
		{[]string{"deploy", "--config"}, ""},
	} {
		if got := flagValue(tc.args, "--config", "-c"); got != tc.want {
			t.Errorf("flagValue(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// fakeWrangler writes node_modules/wrangler/bin/wrangler.js into dir: a script at the
// path of wrangler's own bin that prints the arguments it finally sees, so the hook's
// rewrite is observed from outside, as wrangler would see it.
func fakeWrangler(t *testing.T, dir string) {
	t.Helper()
	bin := filepath.Join(dir, "node_modules", "wrangler", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	js := "console.log('ARGS ' + JSON.stringify(process.argv.slice(2)));\n"
	if err := os.WriteFile(filepath.Join(bin, "wrangler.js"), []byte(js), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestHookCapturesDeploy runs the hook in real Node: `wrangler deploy` in the project's
// deploy script (through npm, which puts node_modules/.bin first on PATH) becomes a dry
// run into the scratch bundle directory with the environment, the record names where
// and how wrangler ran, another Node program is untouched, and `wrangler d1 migrations
// apply --remote` does not run (it would need a Cloudflare account).
func TestHookCapturesDeploy(t *testing.T) {
	if _, err := NodeDir(); err != nil {
		t.Skip(err)
	}
	dir, scratch := t.TempDir(), t.TempDir()
	fakeWrangler(t, dir)
	pkg := `{"name":"p","scripts":{
  "predeploy":"node node_modules/wrangler/bin/wrangler.js d1 migrations apply DB --remote && node -e \"console.log('OTHER ' + process.argv.length)\"",
  "deploy":"node node_modules/wrangler/bin/wrangler.js -c wrangler.prod.jsonc deploy --outdir=dist"}}`
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	c, err := Build(context.Background(), BuildOptions{Dir: dir, Env: "staging", Scratch: scratch, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	bundle := filepath.Join(scratch, "bundle")
	wantArgs := `ARGS ["-c","wrangler.prod.jsonc","deploy","--dry-run","--outdir","` + bundle + `","--env","staging"]`
	for _, want := range []string{wantArgs, "OTHER 1", "skipped `wrangler d1 migrations apply DB --remote`"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), `ARGS ["d1"`) {
		t.Errorf("d1 migrations apply --remote ran:\n%s", log.String())
	}
	want := Captured{Dir: dir, Config: "wrangler.prod.jsonc", Env: "staging", Bundle: bundle}
	if *c != want {
		t.Errorf("captured %+v, want %+v", *c, want)
	}
}

// TestBuildErrors: a deploy path without wrangler deploy, and a failing script, are
// errors naming what ran, with the script's own output.
func TestBuildErrors(t *testing.T) {
	if _, err := NodeDir(); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct{ deploy, want string }{
		{`echo no wrangler here`, "ran no `wrangler deploy`"},
		{`echo the build broke: missing vite.config && exit 3`, "`npm run deploy` failed: exit status 3; its last lines:"},
	} {
		dir := t.TempDir()
		fakeWrangler(t, dir)
		pkg := `{"name":"p","scripts":{"deploy":"` + tc.deploy + `"}}`
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Build(context.Background(), BuildOptions{Dir: dir, Scratch: t.TempDir(), Log: &strings.Builder{}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("deploy script %q: error %v, want one with %q", tc.deploy, err, tc.want)
		}
		if strings.Contains(tc.deploy, "broke") && !strings.Contains(err.Error(), "the build broke: missing vite.config") {
			t.Errorf("error lacks the script's output: %v", err)
		}
	}
}

// TestReadRecord: the last recorded `wrangler deploy` wins; its --cwd (wrangler's global
// flag: run as if started there) moves the directory, relative to where it ran.
func TestReadRecord(t *testing.T) {
	file := filepath.Join(t.TempDir(), "calls.jsonl")
	rec := `{"cwd":"/p","args":["deploy"]}` + "\n" + `{"cwd":"/p","args":["deploy","--cwd","apps/web","--env=staging","--dispatch-namespace","customers"]}` + "\n"
	if err := os.WriteFile(file, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := readRecord(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Captured{Dir: "/p/apps/web", Env: "staging", DispatchNamespace: "customers"}); *c != want {
		t.Errorf("readRecord = %+v, want %+v", *c, want)
	}
}

// TestDispatchNamespaceOfDeploy: the project's own wrangler deploy --dispatch-namespace
// makes the Worker a user Worker as deploy's flag does (wrangler's meaning); both given
// must agree.
func TestDispatchNamespaceOfDeploy(t *testing.T) {
	for _, tc := range []struct{ script, flag, want, wantErr string }{
		{"", "", "", ""},
		{"customers", "", "customers", ""},
		{"", "customers", "customers", ""},
		{"customers", "customers", "customers", ""},
		{"customers", "staging", "", "--dispatch-namespace staging: the project's own deploy runs wrangler deploy --dispatch-namespace customers: pass the same or none (docs/dispatch.md)"},
	} {
		got, err := dispatchNamespace(&Captured{DispatchNamespace: tc.script}, Options{DispatchNamespace: tc.flag, Log: io.Discard})
		if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
			t.Errorf("script %q, flag %q: %q, %v; want %q, %q", tc.script, tc.flag, got, err, tc.want, tc.wantErr)
		}
	}
}
