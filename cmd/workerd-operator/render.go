package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// renderOptions are the flags of `workerd-operator render`.
type renderOptions struct {
	files         []string
	outDir        string
	shims         bool
	check         bool
	workerd       string
	clusterDomain string
	timeout       time.Duration
}

func newRenderCommand() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -f worker.yaml [-f more.yaml] [-o dir] [--check]",
		Short: "Print (or write) the workerd config and modules a Worker's pods will run",
		Long: `render reads Workers (and the ConfigMaps and Secrets they reference) from
multi-document YAML files ("-" for stdin) and renders them exactly as the operator does
for the pods: config.capnp, the modules and the injected shim workers under
/etc/workerd. Service bindings between Workers of the given files resolve to their
in-cluster names (<worker>.<namespace>.svc.<cluster-domain>:<port>); a binding to a
Worker not in the files is an error.

Without -o the files are printed to stdout, one "--- <path>" section each. With -o dir
they are written under dir/<namespace>/<worker>/ (as under /etc/workerd in the pod;
a source.configMap Worker also gets the ConfigMap's keys under modules/).

--check starts the pinned workerd on each rendering with every socket on 127.0.0.1
(secretKeyRef bindings get their values from Secrets in the given files, if present),
waits until all sockets listen, stops it, and on a startup error prints workerd's own
message (e.g. "service hello: Uncaught SyntaxError: ...") and exits with status 2.
The workerd binary is --workerd, else $WORKERD_BIN, else the pinned version installed
by hack/install-workerd.sh. Workers with source.image cannot be checked (their code is
in the image) and are skipped with a note.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRender(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "YAML file with Workers, ConfigMaps and Secrets (repeatable; - for stdin)")
	f.StringVarP(&o.outDir, "output-dir", "o", "", "write the files into this directory instead of printing them")
	f.BoolVar(&o.shims, "shims", false, "also print the contents of the injected shim workers (always written with -o)")
	f.BoolVar(&o.check, "check", false, "start the pinned workerd on the result on 127.0.0.1 and report startup errors")
	f.StringVar(&o.workerd, "workerd", "", "workerd binary for --check (default $WORKERD_BIN, else the pinned version)")
	f.StringVar(&o.clusterDomain, "cluster-domain", render.DefaultClusterDomain, "cluster DNS domain of in-cluster service addresses")
	f.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long --check waits for workerd to listen")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func runRender(ctx context.Context, o *renderOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	m, err := readRenderManifests(o.files, stdin)
	if err != nil {
		return err
	}
	if len(m.Workers) == 0 {
		return fmt.Errorf("render: no Worker (apiVersion fleet.workerd-operator.io/v1alpha1, kind Worker) in %s", strings.Join(o.files, ", "))
	}
	rendered, err := localrun.RenderManifests(m, render.Options{ClusterDomain: o.clusterDomain})
	if err != nil {
		return err
	}
	for _, r := range rendered {
		if err := emitRendered(o, r, stdout); err != nil {
			return err
		}
	}
	if !o.check {
		return nil
	}
	return checkRendered(ctx, o, m, stderr)
}

// readRenderManifests decodes every file ("-" is stdin) into one set of manifests.
func readRenderManifests(files []string, stdin io.Reader) (*localrun.Manifests, error) {
	var m localrun.Manifests
	for _, name := range files {
		if name == "-" {
			if err := localrun.DecodeManifests(stdin, name, &m); err != nil {
				return nil, err
			}
			continue
		}
		if err := decodeManifestFile(name, &m); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

func decodeManifestFile(name string, m *localrun.Manifests) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return localrun.DecodeManifests(f, name, m)
}

// emitRendered prints one rendering to stdout, or with -o writes it under
// <dir>/<namespace>/<worker>/ and says where.
func emitRendered(o *renderOptions, r localrun.Rendered, stdout io.Writer) error {
	if o.outDir == "" {
		return localrun.Format(stdout, r.Worker, r.Output, o.shims)
	}
	dir := filepath.Join(o.outDir, namespaceOr(r.Worker.Namespace), r.Worker.Name)
	if err := localrun.WriteFiles(dir, r.Output.Files, r.Output.External); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s/%s: version %s written to %s\n", namespaceOr(r.Worker.Namespace), r.Worker.Name, r.Output.Version, dir)
	return nil
}

// checkRendered starts workerd on every Worker's rendering; any refusal makes the
// command exit with status 2.
func checkRendered(ctx context.Context, o *renderOptions, m *localrun.Manifests, stderr io.Writer) error {
	bin := o.workerd
	if bin == "" {
		var err error
		if bin, err = toolchain.Workerd(); err != nil {
			return fmt.Errorf("render --check: finding workerd (set --workerd or WORKERD_BIN): %w", err)
		}
	}
	checked, err := renderLoopback(m, o.clusterDomain)
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range checked {
		id := namespaceOr(r.Worker.Namespace) + "/" + r.Worker.Name
		if r.Worker.Spec.Source.Image != nil {
			fmt.Fprintf(stderr, "check %s: skipped: source.image code lives in the image\n", id)
			continue
		}
		if err := checkOne(ctx, o, bin, r, m, stderr); err != nil {
			fmt.Fprintf(stderr, "check %s: FAILED\n%v\n", id, err)
			failed = append(failed, id)
			continue
		}
		fmt.Fprintf(stderr, "check %s: ok (workerd started and listened)\n", id)
	}
	if len(failed) > 0 {
		return &exitError{code: 2, err: fmt.Errorf("render --check: workerd refused %s", strings.Join(failed, ", "))}
	}
	return nil
}

// renderLoopback re-renders with each Worker's service bindings pointing at a free
// loopback address: in-cluster names do not resolve here.
func renderLoopback(m *localrun.Manifests, clusterDomain string) ([]localrun.Rendered, error) {
	loopback := map[string]string{}
	return localrun.RenderManifestsWith(m, render.Options{ClusterDomain: clusterDomain}, func(w *v1alpha1.Worker) string {
		id := namespaceOr(w.Namespace) + "/" + w.Name
		if a, ok := loopback[id]; ok {
			return a
		}
		a, aerr := localrun.FreeLoopbackAddr()
		if aerr != nil {
			a = "127.0.0.1:1"
		}
		loopback[id] = a
		return a
	})
}

// checkOne starts workerd on one rendering (r.Output has service bindings pointing
// at loopback, since in-cluster names do not resolve outside the cluster).
func checkOne(ctx context.Context, o *renderOptions, bin string, r localrun.Rendered, m *localrun.Manifests, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "workerd-render-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := localrun.WriteFiles(dir, r.Output.Files, r.Output.External); err != nil {
		return err
	}
	env, missing := localrun.SecretEnv(r.Worker, r.Output, m.Secrets)
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "check %s/%s: note: Secret keys not in the files, their bindings will be null: %s\n",
			namespaceOr(r.Worker.Namespace), r.Worker.Name, strings.Join(missing, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: bin, Dir: dir, Env: env})
	if err != nil {
		var se *localrun.StartupError
		if errors.As(err, &se) && len(se.Messages) > 0 {
			return errors.New(strings.Join(se.Messages, "\n"))
		}
		return err
	}
	l.Stop()
	return nil
}

func namespaceOr(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}
