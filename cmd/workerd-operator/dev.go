//go:build dev

// The dev subcommand runs the local cluster; it links the dev cluster (virtual-kubelet,
// the volume provisioner, envtest helpers), so it is built only with -tags dev (make dev).

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// devOptions are the flags of `workerd-operator dev`.
type devOptions struct {
	dir        string
	kubeconfig string
	images     string
	install    []string
	manifests  []string
	wait       bool
	timeout    time.Duration
	registry   string
	regData    string
}

func newDevCommand() *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the local one-machine cluster (pods are local processes) until interrupted",
		Long: `dev starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and one
virtual-kubelet node whose pods run as local processes (see docs/local-cluster.md) and
an OCI registry on loopback (--registry; image volumes the image mapping does not name
are pulled from registries),
server-side applies the --install bundle (and waits for its Deployments), then the
--manifests in order, waits until every
fleet.workerd-operator.io object is Ready=True (and every Deployment/StatefulSet has its
replicas ready) unless --wait=false, prints the kubeconfig and a URL per Service, and
runs until SIGINT/SIGTERM, then stops everything and cleans up.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	root := "."
	if wd, err := os.Getwd(); err == nil {
		root = wd
	}
	cmd.Flags().StringVar(&o.dir, "dir", filepath.Join(root, ".dev"), "run directory holding all cluster state (wiped at start)")
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (default <dir>/kubeconfig)")
	cmd.Flags().StringVar(&o.images, "images", "", "image mapping file (default <repo>/config/dev/images.yaml)")
	cmd.Flags().StringArrayVar(&o.install, "install", nil, "install bundle (file or directory) applied first; waits until its Deployments are ready (repeatable)")
	cmd.Flags().StringArrayVar(&o.manifests, "manifests", nil, "manifest file or directory to server-side apply after --install, in order (repeatable)")
	cmd.Flags().BoolVar(&o.wait, "wait", true, "wait until the applied workloads are Ready")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to retry applying and to wait for Ready")
	cmd.Flags().StringVar(&o.registry, "registry", fmt.Sprintf("127.0.0.1:%d", podcontract.DevRegistryPort), "loopback address of the local OCI registry (\"\" for none); push with import --image localhost:PORT/NAME --push")
	cmd.Flags().StringVar(&o.regData, "registry-data", filepath.Join(toolchain.CacheDir(), "registry-data"), "where the local registry keeps pushed images (kept across runs)")
	return cmd
}

// runDev starts the cluster, installs and applies, prints how to reach it and runs
// until SIGINT/SIGTERM; the cluster is stopped on every return.
func runDev(o *devOptions, out, log io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := devcluster.Start(ctx, devcluster.Config{Dir: o.dir, Kubeconfig: o.kubeconfig, ImagesFile: o.images, Log: log,
		Registry: o.registry, RegistryData: o.regData})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(log, "dev: stopping the cluster")
		_ = c.Stop()
	}()
	fmt.Fprintf(out, "kubeconfig: export KUBECONFIG=%s\n", c.Kubeconfig())
	if h := c.RegistryHost(); h != "" {
		fmt.Fprintf(out, "registry: %s (workerd-operator import --bundle DIR --image %s/NAME:TAG --push)\n", h, h)
	}
	if len(o.install) > 0 {
		if err := devInstall(ctx, c, o, log); err != nil {
			return err
		}
	}
	if len(o.manifests) > 0 {
		if err := devApply(ctx, c, o, out, log); err != nil {
			return err
		}
	}
	if err := printServiceURLs(ctx, c, out); err != nil {
		return err
	}
	fmt.Fprintln(out, devIsolationNotice)
	fmt.Fprintln(out, "dev: running; press Ctrl-C to stop")
	<-ctx.Done()
	return nil
}

// devInstall applies the --install bundle and waits for its Deployments, so that
// the manifests applied next find the operator's webhooks serving.
func devInstall(ctx context.Context, c *devcluster.Cluster, o *devOptions, log io.Writer) error {
	objs, err := readAndApply(ctx, c, "installing", o.install, o.timeout, log, c.LocalizeInstall)
	if err != nil {
		return err
	}
	fmt.Fprintln(log, "dev: waiting until the installed Deployments are ready")
	return c.WaitReady(ctx, objs, o.timeout)
}

// devApply applies the --manifests and, with --wait, waits until they are Ready.
func devApply(ctx context.Context, c *devcluster.Cluster, o *devOptions, out, log io.Writer) error {
	objs, err := readAndApply(ctx, c, "applying", o.manifests, o.timeout, log, nil)
	if err != nil {
		return err
	}
	if !o.wait {
		return nil
	}
	fmt.Fprintln(log, "dev: waiting until every sample is Ready")
	if err := c.WaitReady(ctx, objs, o.timeout); err != nil {
		return err
	}
	fmt.Fprintln(out, "all samples Ready")
	return nil
}

// readAndApply server-side applies the objects of the files, changed by adapt when
// set, and returns them for waiting on.
func readAndApply(ctx context.Context, c *devcluster.Cluster, verb string, files []string, timeout time.Duration, log io.Writer, adapt func([]*unstructured.Unstructured) error) ([]*unstructured.Unstructured, error) {
	objs, err := devcluster.ReadManifests(files...)
	if err != nil {
		return nil, err
	}
	if adapt != nil {
		if err := adapt(objs); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(log, "dev: %s %d objects from %v\n", verb, len(objs), files)
	if err := c.Apply(ctx, objs, timeout); err != nil {
		return nil, err
	}
	return objs, nil
}

func printServiceURLs(ctx context.Context, c *devcluster.Cluster, out io.Writer) error {
	urls, err := c.ServiceURLs(ctx)
	if err != nil {
		return err
	}
	for _, u := range urls {
		fmt.Fprintf(out, "service %s/%s: %s\n", u.Namespace, u.Name, u.URL)
	}
	return nil
}

func init() { extraCommands = append(extraCommands, newDevCommand) }
