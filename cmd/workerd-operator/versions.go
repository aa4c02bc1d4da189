package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/scheme"
	"github.com/workerd-operator/workerd-operator/internal/versions"
)

// versionsFlags are the cluster flags of `versions` and `rollback`.
type versionsFlags struct {
	kubeconfig, context, namespace string
}

func (f *versionsFlags) register(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "the Worker's namespace (default: the context's, else default)")
}

// client connects to the cluster of the flags; it returns the client and namespace.
func (f *versionsFlags) client() (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	rest, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no cluster: set KUBECONFIG or --kubeconfig: %w", err)
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	c, err := client.New(rest, client.Options{Scheme: scheme.New()})
	return c, ns, err
}

func (f *versionsFlags) worker(ctx context.Context, name string) (client.Client, *fleetv1alpha1.Worker, error) {
	c, ns, err := f.client()
	if err != nil {
		return nil, nil, err
	}
	w := &fleetv1alpha1.Worker{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, w); err != nil {
		return nil, nil, fmt.Errorf("Worker %s/%s: %w", ns, name, err)
	}
	return c, w, nil
}

// newVersionsCommand: `workerd-operator versions list|view|deploy`, wrangler's
// vocabulary for a Worker's versions and gradual deployments (docs/versions.md).
func newVersionsCommand() *cobra.Command {
	f := &versionsFlags{}
	cmd := &cobra.Command{
		Use:   "versions",
		Short: "List and view a Worker's versions; deploy one, or split requests between two",
		Long: "A Worker's versions as wrangler's `versions` commands show them (docs/versions.md), e.g.\n" +
			"  workerd-operator versions list greeter\n" +
			"  workerd-operator versions view greeter 3f2a9c0d1e4b5a67\n" +
			"  workerd-operator versions deploy greeter 3f2a9c0d1e4b5a67@90 latest@10",
	}
	f.register(cmd)
	cmd.AddCommand(newVersionsListCommand(f), newVersionsViewCommand(f), newVersionsDeployCommand(f))
	return cmd
}

func newVersionsListCommand(f *versionsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list WORKER",
		Short: "List the stored versions, newest first, with their share of requests",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			_, w, err := f.worker(c.Context(), args[0])
			if err != nil {
				return err
			}
			return writeVersions(c.OutOrStdout(), w)
		},
	}
}

// writeVersions writes w's versions as a table: id, created, share, message.
func writeVersions(out io.Writer, w *fleetv1alpha1.Worker) error {
	share := map[string]int32{}
	for _, v := range w.Status.Deployment {
		share[v.VersionID] = v.Percentage
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION ID\tCREATED\tTRAFFIC\tMESSAGE")
	for _, v := range w.Status.Versions {
		traffic := "-"
		if p, ok := share[v.ID]; ok {
			traffic = fmt.Sprintf("%d%%", p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.ID, v.Created.UTC().Format(time.RFC3339), traffic, v.Message)
	}
	return tw.Flush()
}

func newVersionsViewCommand(f *versionsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "view WORKER VERSION-ID",
		Short: "Print a version: its code, bindings and settings (the spec it holds) as JSON",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			cl, w, err := f.worker(c.Context(), args[0])
			if err != nil {
				return err
			}
			s, err := common.VersionSpec(c.Context(), cl, w, args[1])
			if err != nil {
				return err
			}
			e := json.NewEncoder(c.OutOrStdout())
			e.SetIndent("", "  ")
			return e.Encode(map[string]any{"id": args[1], "spec": s})
		},
	}
}

func newVersionsDeployCommand(f *versionsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "deploy WORKER VERSION-ID@PERCENTAGE [VERSION-ID@PERCENTAGE]",
		Short: "Serve one version, or split requests between two (percentages adding up to 100)",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(c *cobra.Command, args []string) error {
			to, err := versions.Parse(args[1:])
			if err != nil {
				return err
			}
			cl, ns, err := f.client()
			if err != nil {
				return err
			}
			if err := versions.Deploy(c.Context(), cl, ns, args[0], to); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "Worker %s/%s: deployed %s\n", ns, args[0], versions.String(to))
			return nil
		},
	}
}

// newRollbackCommand: `workerd-operator rollback WORKER [VERSION-ID]`, wrangler's
// rollback: the deployment before this one, or VERSION-ID at 100 percent.
func newRollbackCommand() *cobra.Command {
	f := &versionsFlags{}
	cmd := &cobra.Command{
		Use:   "rollback WORKER [VERSION-ID]",
		Short: "Go back to the deployment before this one, or to one version",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			cl, ns, err := f.client()
			if err != nil {
				return err
			}
			id := ""
			if len(args) == 2 {
				id = args[1]
			}
			to, err := versions.Rollback(c.Context(), cl, ns, args[0], id)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "Worker %s/%s: rolled back to %s\n", ns, args[0], versions.String(to))
			return nil
		},
	}
	f.register(cmd)
	return cmd
}
