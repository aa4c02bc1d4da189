package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/deploy"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// deployFlags are the flags of `deploy` that are not deploy.Options.
type deployFlags struct {
	kubeconfig, context string
}

func newDeployCommand() *cobra.Command {
	o := deploy.Options{}
	var f deployFlags
	cmd := &cobra.Command{
		Use:   "deploy [DIR] [--env NAME] [--namespace NS] [--image REPO] [--secrets-from FILE] [--dry-run]",
		Short: "Build a wrangler project as wrangler deploy does and run it on the cluster",
		Long: `deploy is wrangler deploy for the cluster. In the project directory DIR (default
".") it installs the dependencies if there are none (npm ci), runs the project's own
deploy path (its package.json build script, then its deploy script, else
npx wrangler deploy) on the pinned Node 22, with every wrangler deploy made a dry run
that writes the bundle, then maps the configuration wrangler used (the build tool's
generated one included) exactly as import does, pushes the code and assets as an image
to --image REPO, server-side applies the objects, waits until they are Ready and prints
the Worker's URL. wrangler d1 migrations apply --remote is skipped: the D1Database
applies the migrations.

Under make dev (kubeconfig context ` + podcontract.DevContext + `) --image defaults to the dev registry,
localhost:5001/<worker>. --secrets-from .dev.vars writes the values of the Worker's
secrets into its Secret; no value is read without it. --dry-run builds the image
without pushing it and prints the objects instead of applying them. import writes the
same objects for GitOps (docs/deploy.md).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = "."
			if len(args) == 1 {
				o.Dir = args[0]
			}
			if o.DispatchNamespace != "" {
				// Before the build, which takes minutes.
				if err := wrangler.CheckDispatchNamespace(o.DispatchNamespace); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDeploy(ctx, o, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Env, "env", "", "the wrangler environment to deploy (wrangler's --env; CLOUDFLARE_ENV for the build)")
	fl.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the objects (default: the context's, else default)")
	fl.StringVar(&o.Image, "image", "", "repository the bundle image is pushed to, e.g. registry.example.com/team/NAME (default under make dev: localhost:5001/<worker>)")
	fl.BoolVar(&o.DryRun, "dry-run", false, "build the image without pushing, print the objects, apply nothing")
	fl.StringVar(&o.SecretsFrom, "secrets-from", "", "dotenv file (.dev.vars, .env) whose values become the Worker's Secret")
	fl.StringVar(&o.R2Endpoint, "r2-endpoint", "", "S3-compatible endpoint of the R2Buckets that r2_buckets bind (as import)")
	fl.BoolVar(&o.AllowUnsupported, "allow-unsupported", false, "deploy despite keys that cannot be mapped (as import)")
	fl.StringVar(&o.DispatchNamespace, "dispatch-namespace", "", "deploy the Worker as a user Worker of this dispatch namespace (spec.dispatchNamespace), as wrangler deploy --dispatch-namespace (docs/dispatch.md)")
	fl.Var(&placementFlag{&o.DispatchPlacement}, "dispatch-placement", "Dedicated or Shared: where the user Workers that the project's build uploads into a dispatch namespace run (spec.dispatchPlacement; docs/dispatch.md)")
	fl.StringToStringVar(&o.ContainerImages, "container-image", nil, "CLASS=REF: the built image of a containers[] entry whose image is a Dockerfile (docs/containers.md); repeatable")
	fl.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "how long to retry applying and to wait for Ready")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
	return cmd
}

func runDeploy(ctx context.Context, o deploy.Options, f deployFlags, stdout, stderr io.Writer) error {
	o.Log = stderr
	devImage, err := clusterOf(&o, f)
	if err != nil && !o.DryRun {
		return err
	}
	if o.Image == "" && devImage {
		o.Image = fmt.Sprintf("localhost:%d/%s", podcontract.DevRegistryPort, deploy.RepositoryName(o.Dir))
	}
	res, err := deploy.Run(ctx, o)
	if err != nil {
		return err
	}
	if o.DryRun {
		return writeObjects(stdout, res.Objects)
	}
	fmt.Fprintln(stdout, res.URL)
	return nil
}

// clusterOf loads the kubeconfig into o.Rest (and the context's namespace when
// --namespace is not given) and tells whether it is make dev's cluster.
func clusterOf(o *deploy.Options, f deployFlags) (bool, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	raw, err := cc.RawConfig()
	if err == nil {
		o.Rest, err = cc.ClientConfig()
	}
	if err != nil {
		return false, fmt.Errorf("no cluster to deploy to: set KUBECONFIG or --kubeconfig (make dev prints its own), or pass --dry-run: %w", err)
	}
	if o.Namespace == "" {
		if ns, _, err := cc.Namespace(); err == nil {
			o.Namespace = ns
		}
	}
	current := raw.CurrentContext
	if f.context != "" {
		current = f.context
	}
	return current == podcontract.DevContext, nil
}

// writeObjects writes objs as one YAML stream.
func writeObjects(w io.Writer, objs []*unstructured.Unstructured) error {
	for i, u := range objs {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// placementFlag is --dispatch-placement: Dedicated or Shared.
type placementFlag struct{ p *v1alpha1.DispatchPlacement }

func (f *placementFlag) String() string { return string(*f.p) }
func (f *placementFlag) Type() string   { return "placement" }
func (f *placementFlag) Set(v string) error {
	switch p := v1alpha1.DispatchPlacement(v); p {
	case v1alpha1.DispatchPlacementDedicated, v1alpha1.DispatchPlacementShared:
		*f.p = p
		return nil
	}
	return fmt.Errorf("%q: want Dedicated or Shared (spec.dispatchPlacement; docs/dispatch.md)", v)
}
