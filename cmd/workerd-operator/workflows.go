package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// workflowsFlags are the flags every `workflows` subcommand shares.
type workflowsFlags struct {
	sidecarURL, workflow string
}

// client is the engine client for the flags; an error when --workflow is missing.
func (f *workflowsFlags) client() (*api.Client, error) {
	if f.workflow == "" {
		return nil, fmt.Errorf("workflows: --workflow is required (the Workflow's name)")
	}
	return api.NewClient(f.sidecarURL, nil), nil
}

// workflowsError words an engine error for the command line.
func workflowsError(err error) error {
	var ae *api.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("workflows: %s (%s)", ae.Message, ae.Code)
	}
	return fmt.Errorf("workflows: %w", err)
}

// newWorkflowsCommand: `workerd-operator workflows --sidecar http://<pod-ip>:<sidecar port>
// --workflow <name> list|status|terminate|delete ...` — operator access to a workflow
// engine's HTTP API (docs/workflows.md).
func newWorkflowsCommand() *cobra.Command {
	f := &workflowsFlags{}
	local := api.PodURL("127.0.0.1")
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "List, inspect, terminate and delete workflow instances through a sidecar's engine",
		Long: "Talks to the workflow engine's HTTP API on a sidecar (docs/workflows.md), e.g.\n" +
			"  workerd-operator workflows --sidecar " + local + " --workflow orders list --status errored\n" +
			"  workerd-operator workflows --sidecar " + local + " --workflow orders status order-1\n" +
			"  workerd-operator workflows --sidecar " + local + " --workflow orders terminate order-1 order-2",
	}
	cmd.PersistentFlags().StringVar(&f.sidecarURL, "sidecar", local, "base URL of the sidecar running the workflow engine")
	cmd.PersistentFlags().StringVar(&f.workflow, "workflow", "", "Workflow name (required)")
	cmd.AddCommand(newWorkflowsListCommand(f), newWorkflowsStatusCommand(f), newWorkflowsBulkCommand(f, "terminate"), newWorkflowsBulkCommand(f, "delete"))
	return cmd
}

func newWorkflowsListCommand(f *workflowsFlags) *cobra.Command {
	var o api.ListOptions
	var all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List instances (optionally by --status), one page (--limit, --cursor) or --all",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tSTEPS\tCREATED\tERROR")
			for {
				page, err := cl.List(c.Context(), f.workflow, o)
				if err != nil {
					return workflowsError(err)
				}
				for _, in := range page.Instances {
					e := ""
					if in.Error != nil {
						e = in.Error.Name + ": " + in.Error.Message
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", in.ID, in.Status, in.Steps, time.UnixMilli(in.Created).UTC().Format(time.RFC3339), e)
				}
				o.Cursor = page.Cursor
				if !all || o.Cursor == "" {
					break
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if o.Cursor != "" {
				fmt.Fprintf(c.ErrOrStderr(), "more: --cursor %s\n", o.Cursor)
			}
			return nil
		},
	}
	list.Flags().StringVar(&o.Status, "status", "", "only instances with this status ("+strings.Join(api.Statuses, ", ")+")")
	list.Flags().IntVar(&o.Limit, "limit", 50, "page size, 1 to 1000")
	list.Flags().StringVar(&o.Cursor, "cursor", "", "continue after this instance id (printed by the previous page)")
	list.Flags().BoolVar(&all, "all", false, "follow cursors to the end")
	return list
}

func newWorkflowsStatusCommand(f *workflowsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "Print an instance (status, output, error) and its steps as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			in, err := cl.Get(c.Context(), f.workflow, args[0])
			if err != nil {
				return workflowsError(err)
			}
			steps, err := cl.Steps(c.Context(), f.workflow, args[0])
			if err != nil {
				return workflowsError(err)
			}
			if steps == nil {
				steps = []api.Step{}
			}
			enc := json.NewEncoder(c.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				*api.Instance
				Steps []api.Step `json:"steps"`
			}{in, steps})
		},
	}
}

func newWorkflowsBulkCommand(f *workflowsFlags, op string) *cobra.Command {
	return &cobra.Command{
		Use:   op + " ID...",
		Short: strings.ToUpper(op[:1]) + op[1:] + " instances (up to 1000 ids)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			out, err := cl.Bulk(c.Context(), f.workflow, op, args)
			if err != nil {
				return workflowsError(err)
			}
			for _, id := range out.Done {
				fmt.Fprintf(c.OutOrStdout(), "%s: %sed\n", id, strings.TrimSuffix(op, "e"))
			}
			for _, e := range out.Errors {
				fmt.Fprintf(c.ErrOrStderr(), "%s: %s (%s)\n", e.ID, e.Message, e.Code)
			}
			if len(out.Errors) > 0 {
				return fmt.Errorf("workflows: %s failed for %d of %d instances", op, len(out.Errors), len(args))
			}
			return nil
		},
	}
}
