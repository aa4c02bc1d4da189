package deploy

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// hook turns wrangler's deploy into a dry run that records what it built. A preload
// (NODE_OPTIONS=--require) rather than a `wrangler` earlier on PATH: npm and npx put
// node_modules/.bin first on PATH, so a PATH shim would lose to the project's own
// wrangler, while every Node process inherits NODE_OPTIONS, however the project's
// script reaches wrangler (npm scripts, npx, a wrapper such as OpenNext's CLI that
// spawns it). wrangler has no setting that makes deploy a dry run.
//
//go:embed wrangler-hook.cjs
var hook []byte

// DocsURL is where the one-command path is described.
const DocsURL = "docs/deploy.md#one-command"

// Step is one command of a project's deploy path.
type Step []string

func (s Step) String() string { return strings.Join(s, " ") }

// runsBuild matches a deploy script that runs the project's build itself.
var runsBuild = regexp.MustCompile(`\b(npm run|pnpm( run)?|yarn( run)?|bun run) build\b`)

// Plan returns the commands that deploy a project with these package.json scripts, as
// Cloudflare's Workers Builds does (build command, then deploy command;
// https://developers.cloudflare.com/workers/ci-cd/builds/configuration/): the build
// script unless the deploy script runs it, then the deploy script, else `npx wrangler
// deploy`.
func Plan(scripts map[string]string) []Step {
	var steps []Step
	deploy, hasDeploy := scripts["deploy"]
	if build, ok := scripts["build"]; ok && !(hasDeploy && (runsBuild.MatchString(deploy) || strings.Contains(deploy, build))) {
		steps = append(steps, Step{"npm", "run", "build"})
	}
	if hasDeploy {
		return append(steps, Step{"npm", "run", "deploy"})
	}
	return append(steps, Step{"npx", "wrangler", "deploy"})
}

// Captured is what the project's deploy left for us: the bundle of wrangler's dry run
// and how wrangler was called.
type Captured struct {
	// Dir is the directory wrangler ran in.
	Dir string
	// Config is wrangler's --config, relative to Dir ("" when not given: wrangler then
	// reads the redirect file or the project's own configuration).
	Config string
	// Env is wrangler's --env ("" for the top level).
	Env string
	// DispatchNamespace is wrangler's --dispatch-namespace: the project deploys a user
	// Worker of that dispatch namespace.
	DispatchNamespace string
	// Bundle is the --outdir wrangler wrote the modules to.
	Bundle string
}

// BuildOptions say which project to build and where.
type BuildOptions struct {
	// Dir is the project directory (with package.json).
	Dir string
	// Env is the wrangler environment (CLOUDFLARE_ENV for the build, --env for wrangler).
	Env string
	// Scratch receives the bundle, the hook and the record of wrangler's calls.
	Scratch string
	// Log receives the output of every command as it runs.
	Log io.Writer
	// ExtraEnv is more environment of the commands (the loopback Cloudflare API's).
	ExtraEnv []string
}

// Build runs the project's deploy path (dependencies installed first when the project
// has none) with wrangler's deploy turned into a dry run and returns what it captured.
// A failing command is an error naming it, with the tail of its output.
func Build(ctx context.Context, o BuildOptions) (*Captured, error) {
	node, err := NodeDir()
	if err != nil {
		return nil, err
	}
	scripts, err := readScripts(o.Dir)
	if err != nil {
		return nil, err
	}
	hookFile, record := filepath.Join(o.Scratch, "wrangler-hook.cjs"), filepath.Join(o.Scratch, "wrangler-calls.jsonl")
	bundle := filepath.Join(o.Scratch, "bundle")
	if err := os.WriteFile(hookFile, hook, 0o644); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "PATH="+node+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CI=1", "WRANGLER_SEND_METRICS=false", "NO_UPDATE_NOTIFIER=1",
		"NODE_OPTIONS="+strings.TrimSpace(os.Getenv("NODE_OPTIONS")+` --require "`+hookFile+`"`),
		"WORKERD_OPERATOR_RECORD="+record, "WORKERD_OPERATOR_OUTDIR="+bundle, "WORKERD_OPERATOR_ENV="+o.Env)
	env = append(env, o.ExtraEnv...)
	if wrangler.DeclaresContainers(o.Dir) {
		// The cluster runs images already built (--container-image); wrangler would
		// build the containers' Dockerfiles with Docker.
		env = append(env, "WORKERD_OPERATOR_CONTAINERS_ROLLOUT=none")
	}
	if o.Env != "" {
		// The Vite plugin builds the configuration of this environment
		// (https://developers.cloudflare.com/workers/vite-plugin/reference/cloudflare-environments/).
		env = append(env, "CLOUDFLARE_ENV="+o.Env)
	}
	steps := Plan(scripts)
	if _, err := os.Stat(filepath.Join(o.Dir, "node_modules")); errors.Is(err, os.ErrNotExist) && scripts != nil {
		steps = append([]Step{installStep(o.Dir)}, steps...)
	}
	for _, s := range steps {
		fmt.Fprintf(o.Log, "deploy: running %s\n", s)
		if err := run(ctx, o.Dir, env, s, o.Log); err != nil {
			return nil, err
		}
	}
	c, err := readRecord(record)
	if err != nil {
		return nil, fmt.Errorf("%s: the deploy path (%s) ran no `wrangler deploy`, so there is nothing to deploy: "+
			"give the project a deploy script that runs it (%s)", o.Dir, stepList(steps), DocsURL)
	}
	c.Bundle = bundle
	return c, nil
}

func stepList(steps []Step) string {
	s := make([]string, len(steps))
	for i, st := range steps {
		s[i] = st.String()
	}
	return strings.Join(s, "; ")
}

// installStep installs the locked dependencies (npm ci) or, without a lockfile, the
// declared ones.
func installStep(dir string) Step {
	flags := []string{"--no-audit", "--no-fund", "--loglevel=error"}
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err == nil {
		return append(Step{"npm", "ci"}, flags...)
	}
	return append(Step{"npm", "install"}, flags...)
}

// readScripts returns package.json's scripts; nil without a package.json.
func readScripts(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "package.json"), err)
	}
	if pkg.Scripts == nil {
		pkg.Scripts = map[string]string{}
	}
	return pkg.Scripts, nil
}

// NodeDir is the directory of the pinned Node 22 (hack/install-node.sh, the same the
// tests use); outside a checkout, the one already installed in the cache.
func NodeDir() (string, error) {
	if d, err := toolchain.NodeBin(); err == nil {
		return d, nil
	}
	found, _ := filepath.Glob(filepath.Join(toolchain.CacheDir(), "node", "22.*", "bin", "node"))
	if len(found) == 0 {
		return "", errors.New("Node 22 is needed to build a wrangler project (wrangler 4 needs Node >= 22): run hack/install-node.sh of a workerd-operator checkout")
	}
	return filepath.Dir(found[len(found)-1]), nil
}

// tailLines is how much of a failing command's output an error carries.
const tailLines = 30

func run(ctx context.Context, dir string, env []string, s Step, log io.Writer) error {
	cmd := exec.CommandContext(ctx, s[0], s[1:]...)
	cmd.Dir, cmd.Env = dir, env
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			fmt.Fprintf(log, "  | %s\n", sc.Text())
			if tail = append(tail, sc.Text()); len(tail) > tailLines {
				tail = tail[1:]
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("%s: `%s` failed: %v; its last lines:\n  %s", dir, s, err, strings.Join(tail, "\n  "))
	}
	return nil
}

// readRecord reads the last `wrangler deploy` the hook recorded.
func readRecord(file string) (*Captured, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var rec struct {
		Cwd  string   `json:"cwd"`
		Args []string `json:"args"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	dir := rec.Cwd
	if cwd := flagValue(rec.Args, "--cwd"); cwd != "" { // wrangler runs as if started there
		dir = filepath.Join(rec.Cwd, cwd)
		if filepath.IsAbs(cwd) {
			dir = cwd
		}
	}
	return &Captured{Dir: dir, Config: flagValue(rec.Args, "--config", "-c"), Env: flagValue(rec.Args, "--env", "-e"),
		DispatchNamespace: flagValue(rec.Args, "--dispatch-namespace")}, nil
}

// flagValue is the value of the last of the flags in args (yargs' --f v and --f=v).
func flagValue(args []string, names ...string) string {
	v := ""
	for i, a := range args {
		for _, n := range names {
			switch {
			case a == n && i+1 < len(args):
				v = args[i+1]
			case strings.HasPrefix(a, n+"="):
				v = strings.TrimPrefix(a, n+"=")
			}
		}
	}
	return v
}
