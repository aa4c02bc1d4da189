// Command workerd-operator is the one binary of the project: the manager (controllers,
// webhooks, cron dispatcher), the sidecar next to workerd, the local cluster, and the
// user-facing tools `render` and `cron`.
//
//	workerd-operator manager    run the controllers and webhooks
//	workerd-operator sidecar    run the per-pod sidecar (channels, workflows, metrics)
//	workerd-operator check-image-volumes  refuse image volumes with links out of them (init container)
//	workerd-operator dev        run the local one-machine cluster (built with -tags dev: make dev)
//	workerd-operator render     print what the pods of a Worker will run
//	workerd-operator import     write the objects for a wrangler project
//	workerd-operator deploy     build a wrangler project and run it on the cluster
//	workerd-operator cron       check Cloudflare-dialect cron expressions
//	workerd-operator workflows  list and operate workflow instances
//	workerd-operator versions   list and view a Worker's versions, deploy or split them
//	workerd-operator rollback   go back to a Worker's previous deployment
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "workerd-operator",
		Short:         "Run fleets of workerd on Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newManagerCommand(),
		newSidecarCommand(),
		newImageCheckCommand(),
		newRestoreStoreCommand(),
		newRenderCommand(),
		newImportCommand(),
		newDeployCommand(),
		newCronCommand(),
		newWorkflowsCommand(),
		newVersionsCommand(),
		newRollbackCommand(),
	)
	for _, c := range extraCommands {
		root.AddCommand(c())
	}
	return root
}

// extraCommands are subcommands compiled in by build tags (dev).
var extraCommands []func() *cobra.Command

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit status (e.g. `render --check` failures).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}
