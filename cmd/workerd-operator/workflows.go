package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// newWorkflowsCommand: `workerd-operator workflows --sidecar http://<pod-ip>:9092
// --workflow <name> list|status|terminate|delete ...` — operator access to a workflow
// engine's HTTP API (docs/workflows.md).
func newWorkflowsCommand() *cobra.Command {
	var sidecarURL, workflow string
	client := &http.Client{Timeout: 30 * time.Second}
	call := func(method, path string, body any, out any) error {
		if workflow == "" {
			return fmt.Errorf("workflows: --workflow is required (the Workflow's name)")
		}
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, strings.TrimSuffix(sidecarURL, "/")+"/workflows/"+url.PathEscape(workflow)+path, rd)
		if err != nil {
			return fmt.Errorf("workflows: --sidecar %q: %w", sidecarURL, err)
		}
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("workflows: %w", err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			var e struct {
				Error struct{ Code, Message string }
			}
			if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
				return fmt.Errorf("workflows: %s (%s)", e.Error.Message, e.Error.Code)
			}
			return fmt.Errorf("workflows: sidecar answered %d: %.300s", res.StatusCode, b)
		}
		return json.Unmarshal(b, out)
	}
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "List, inspect, terminate and delete workflow instances through a sidecar's engine",
		Long: "Talks to the workflow engine's HTTP API on a sidecar (docs/workflows.md), e.g.\n" +
			"  workerd-operator workflows --sidecar http://127.0.0.1:9092 --workflow orders list --status errored\n" +
			"  workerd-operator workflows --sidecar http://127.0.0.1:9092 --workflow orders status order-1\n" +
			"  workerd-operator workflows --sidecar http://127.0.0.1:9092 --workflow orders terminate order-1 order-2",
	}
	cmd.PersistentFlags().StringVar(&sidecarURL, "sidecar", "http://127.0.0.1:9092", "base URL of the sidecar running the workflow engine")
	cmd.PersistentFlags().StringVar(&workflow, "workflow", "", "Workflow name (required)")

	var status, cursor string
	var limit int
	var all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List instances (optionally by --status), one page (--limit, --cursor) or --all",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tSTEPS\tCREATED\tERROR")
			cur := cursor
			for {
				q := url.Values{}
				if status != "" {
					q.Set("status", status)
				}
				if limit > 0 {
					q.Set("limit", fmt.Sprint(limit))
				}
				if cur != "" {
					q.Set("cursor", cur)
				}
				var page struct {
					Instances []struct {
						ID, Status string
						Steps      int
						CreatedMs  int64
						Error      *struct{ Name, Message string }
					}
					Cursor string
				}
				if err := call("GET", "/instances?"+q.Encode(), nil, &page); err != nil {
					return err
				}
				for _, in := range page.Instances {
					e := ""
					if in.Error != nil {
						e = in.Error.Name + ": " + in.Error.Message
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", in.ID, in.Status, in.Steps, time.UnixMilli(in.CreatedMs).UTC().Format(time.RFC3339), e)
				}
				cur = page.Cursor
				if !all || cur == "" {
					break
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if cur != "" {
				fmt.Fprintf(c.ErrOrStderr(), "more: --cursor %s\n", cur)
			}
			return nil
		},
	}
	list.Flags().StringVar(&status, "status", "", "only instances with this status (queued, running, paused, errored, terminated, complete, waitingForPause, waiting)")
	list.Flags().IntVar(&limit, "limit", 50, "page size, 1 to 1000")
	list.Flags().StringVar(&cursor, "cursor", "", "continue after this instance id (printed by the previous page)")
	list.Flags().BoolVar(&all, "all", false, "follow cursors to the end")

	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	statusCmd := &cobra.Command{
		Use:   "status ID",
		Short: "Print an instance (status, output, error) and its steps as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var in, steps map[string]any
			if err := call("GET", "/instances/"+url.PathEscape(args[0]), nil, &in); err != nil {
				return err
			}
			if err := call("GET", "/instances/"+url.PathEscape(args[0])+"/steps", nil, &steps); err != nil {
				return err
			}
			in["steps"] = steps["steps"]
			return printJSON(c, in)
		},
	}
	bulk := func(op string) *cobra.Command {
		return &cobra.Command{
			Use:   op + " ID...",
			Short: strings.ToUpper(op[:1]) + op[1:] + " instances (up to 1000 ids)",
			Args:  cobra.MinimumNArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				var out struct {
					Done   []string
					Errors []struct{ ID, Code, Message string }
				}
				if err := call("POST", "/bulk/"+op, map[string]any{"ids": args}, &out); err != nil {
					return err
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
	cmd.AddCommand(list, statusCmd, bulk("terminate"), bulk("delete"))
	return cmd
}
