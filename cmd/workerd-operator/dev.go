//go:build dev

// The dev subcommand runs the local cluster; it links the dev cluster (virtual-kubelet,
// the volume provisioner, envtest helpers), so it is built only with -tags dev (make dev).

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/internal/devcluster"
)

func newDevCommand() *cobra.Command {
	var (
		dir        string
		kubeconfig string
		images     string
		install    []string
		manifests  []string
		wait       bool
		timeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the local one-machine cluster (pods are local processes) until interrupted",
		Long: `dev starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and one
virtual-kubelet node whose pods run as local processes (see docs/local-cluster.md),
server-side applies the --install bundle (and waits for its Deployments), then the
--manifests in order, waits until every
fleet.workerd-operator.io object is Ready=True (and every Deployment/StatefulSet has its
replicas ready) unless --wait=false, prints the kubeconfig and a URL per Service, and
runs until SIGINT/SIGTERM, then stops everything and cleans up.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			c, err := devcluster.Start(ctx, devcluster.Config{Dir: dir, Kubeconfig: kubeconfig, ImagesFile: images, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			defer func() {
				fmt.Fprintln(cmd.ErrOrStderr(), "dev: stopping the cluster")
				_ = c.Stop()
			}()
			fmt.Fprintf(out, "kubeconfig: export KUBECONFIG=%s\n", c.Kubeconfig())
			if len(install) > 0 {
				objs, err := devcluster.ReadManifests(install...)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "dev: installing %d objects from %v\n", len(objs), install)
				if err := c.Apply(ctx, objs, timeout); err != nil {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "dev: waiting until the installed Deployments are ready")
				if err := c.WaitReady(ctx, objs, timeout); err != nil {
					return err
				}
			}
			if len(manifests) > 0 {
				objs, err := devcluster.ReadManifests(manifests...)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "dev: applying %d objects from %v\n", len(objs), manifests)
				if err := c.Apply(ctx, objs, timeout); err != nil {
					return err
				}
				if wait {
					fmt.Fprintln(cmd.ErrOrStderr(), "dev: waiting until every sample is Ready")
					if err := c.WaitReady(ctx, objs, timeout); err != nil {
						return err
					}
					fmt.Fprintln(out, "all samples Ready")
				}
			}
			urls, err := c.ServiceURLs(ctx)
			if err != nil {
				return err
			}
			for _, u := range urls {
				fmt.Fprintf(out, "service %s/%s: %s\n", u.Namespace, u.Name, u.URL)
			}
			fmt.Fprintln(out, "dev: running; press Ctrl-C to stop")
			<-ctx.Done()
			return nil
		},
	}
	root := "."
	if wd, err := os.Getwd(); err == nil {
		root = wd
	}
	cmd.Flags().StringVar(&dir, "dir", filepath.Join(root, ".dev"), "run directory holding all cluster state (wiped at start)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (default <dir>/kubeconfig)")
	cmd.Flags().StringVar(&images, "images", "", "image mapping file (default <repo>/config/dev/images.yaml)")
	cmd.Flags().StringArrayVar(&install, "install", nil, "install bundle (file or directory) applied first; waits until its Deployments are ready (repeatable)")
	cmd.Flags().StringArrayVar(&manifests, "manifests", nil, "manifest file or directory to server-side apply after --install, in order (repeatable)")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the applied workloads are Ready")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to retry applying and to wait for Ready")
	return cmd
}

func init() { extraCommands = append(extraCommands, newDevCommand) }
