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
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
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
		Long: `render reads Workers and the objects they use (DurableObjectNamespaces, Workflows,
CronSchedules, ConfigMaps, Secrets) from multi-document YAML files ("-" for stdin) and
renders them exactly as the operator does for the pods: config.capnp, the modules and
the injected shim workers under /etc/workerd, for each Worker's pods, each
DurableObjectNamespace's shard pods and each Workflow's engine pods. Bindings between
objects of the given files resolve to their in-cluster names (e.g.
<worker>.<namespace>.svc.<cluster-domain>:<port>); a reference to an object not in the
files is an error. A DurableObjectNamespace's uniqueKey is "<namespace>-<name>", as in
the cluster.

Without -o the files are printed to stdout, one "--- <path>" section each. With -o dir
they are written under dir/<namespace>/<pods>/ (<worker>, <namespace>-do or
<workflow>-wf; as under /etc/workerd in the pod;
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
	f.StringArrayVarP(&o.files, "filename", "f", nil, "YAML file with Workers, DurableObjectNamespaces, Workflows, CronSchedules, ConfigMaps and Secrets (repeatable; - for stdin)")
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
	m, err := readManifests(o.files, stdin)
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
		if o.outDir == "" {
			if err := localrun.FormatRendered(stdout, r, o.shims); err != nil {
				return err
			}
			continue
		}
		dir := filepath.Join(o.outDir, namespaceOr(r.Worker.Namespace), r.PodSet())
		if err := localrun.WriteFiles(dir, r.Output.Files, r.Output.External); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s/%s: version %s written to %s\n", namespaceOr(r.Worker.Namespace), r.PodSet(), r.Output.Version, dir)
	}
	if !o.check {
		return nil
	}
	bin, err := workerdFor(o)
	if err != nil {
		return err
	}
	// Re-render with every address on loopback: in-cluster names do not resolve here.
	checked, err := localrun.RenderManifestsWith(m, render.Options{ClusterDomain: o.clusterDomain}, loopbackAddresses())
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range checked {
		id := namespaceOr(r.Worker.Namespace) + "/" + r.PodSet()
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

// workerdFor is --workerd, else the pinned workerd.
func workerdFor(o *renderOptions) (string, error) {
	if o.workerd != "" {
		return o.workerd, nil
	}
	bin, err := toolchain.Workerd()
	if err != nil {
		return "", fmt.Errorf("render --check: finding workerd (set --workerd or WORKERD_BIN): %w", err)
	}
	return bin, nil
}

// readManifests decodes the objects of files ("-" is stdin).
func readManifests(files []string, stdin io.Reader) (*localrun.Manifests, error) {
	m := &localrun.Manifests{}
	for _, name := range files {
		r := stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			r = f
		}
		if err := localrun.DecodeManifests(r, name, m); err != nil {
			return nil, err
		}
	}
	return m, nil
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
	if r.Worker.Spec.Assets != nil {
		// The asset files live in spec.assets.image; an empty directory stands in for
		// them, which is all workerd needs to start.
		if err := os.MkdirAll(filepath.Join(dir, podcontract.AssetsSubdir), 0o755); err != nil {
			return err
		}
	}
	env, missing := localrun.SecretEnv(r.Worker, r.Output, m.Secrets)
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "check %s/%s: note: Secret keys not in the files, their bindings will be null: %s\n",
			namespaceOr(r.Worker.Namespace), r.PodSet(), strings.Join(missing, ", "))
	}
	externals, absent, err := localrun.SecretFiles(r.Worker, r.Output, m.Secrets, dir, env)
	if err != nil {
		return err
	}
	if len(absent) > 0 {
		fmt.Fprintf(stderr, "check %s/%s: note: Secrets not in the files, their hyperdrive bindings get empty credentials: %s\n",
			namespaceOr(r.Worker.Namespace), r.PodSet(), strings.Join(absent, ", "))
	}
	lo, err := r.LocalOptions(dir)
	if err != nil {
		return err
	}
	lo.Binary, lo.Env, lo.Externals = bin, append(lo.Env, env...), externals
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	l, err := localrun.StartLocal(ctx, lo)
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

// loopbackAddresses gives every Worker, shard gateway and workflow engine its own
// free loopback address, the same one each time it is asked for.
func loopbackAddresses() localrun.Addresses {
	seen := map[string]string{}
	addr := func(id string) string {
		if a, ok := seen[id]; ok {
			return a
		}
		a, err := localrun.FreeLoopbackAddr()
		if err != nil {
			a = "127.0.0.1:1"
		}
		seen[id] = a
		return a
	}
	return localrun.Addresses{
		Worker: func(w *v1alpha1.Worker) string { return addr("Worker/" + namespaceOr(w.Namespace) + "/" + w.Name) },
		Shard: func(d *v1alpha1.DurableObjectNamespace, i int) string {
			return addr(fmt.Sprintf("DurableObjectNamespace/%s/%s/%d", namespaceOr(d.Namespace), d.Name, i))
		},
		Engine: func(wf *v1alpha1.Workflow) string {
			return addr("Workflow/" + namespaceOr(wf.Namespace) + "/" + wf.Name)
		},
	}
}

func namespaceOr(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}
