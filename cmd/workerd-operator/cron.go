package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/internal/cron"
)

// cronNextResult is the one JSON object `cron next` prints.
type cronNextResult struct {
	Valid bool      `json:"valid"`
	Fires *bool     `json:"fires,omitempty"`
	Next  *[]string `json:"next,omitempty"`
	Error string    `json:"error,omitempty"`
}

func newCronCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "Check Cloudflare-dialect cron expressions",
		Long: "Check Cloudflare-dialect cron expressions (5 fields, day of week 1-7 with 1 = Sunday,\n" +
			"L, W, LW, L-n, nL, n#k) the way the admission webhook and the dispatcher read them.",
	}
	cmd.AddCommand(newCronNextCommand())
	return cmd
}

func newCronNextCommand() *cobra.Command {
	var afterText, zone string
	var n int
	cmd := &cobra.Command{
		Use:   "next [--after RFC3339] [-n N] [--time-zone ZONE] 'EXPR'",
		Short: "Print whether EXPR is valid and its next N fire times, as one JSON object",
		Long: "Prints {\"valid\":bool,\"fires\":bool,\"next\":[\"<RFC3339 UTC>\",...]} for a valid expression\n" +
			"(fire times strictly after --after, default now) or {\"valid\":false,\"error\":\"...\"}\n" +
			"and exit status 1 for an invalid one. An expression that never fires (0 0 30 2 *) is\n" +
			"valid Cloudflare syntax with \"fires\":false; the admission webhook rejects it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 || n > 1000 {
				return fmt.Errorf("cron next: -n %d is out of range 0-1000", n)
			}
			after := time.Now()
			if afterText != "" {
				t, err := time.Parse(time.RFC3339Nano, afterText)
				if err != nil {
					return fmt.Errorf("cron next: --after %q is not an RFC 3339 time such as 2026-11-30T15:00:00Z: %w", afterText, err)
				}
				after = t
			}
			loc := time.UTC
			if zone != "" {
				l, err := time.LoadLocation(zone)
				if err != nil {
					return fmt.Errorf("cron next: --time-zone %q is not a time zone Go's time database knows: %w", zone, err)
				}
				loc = l
			}
			var res cronNextResult
			s, err := cron.Parse(args[0])
			if err != nil {
				res.Error = err.Error()
			} else {
				res.Valid = true
				fires := s.Fires()
				next := []string{}
				for t := after; len(next) < n && fires; {
					if t = s.Next(t, loc); t.IsZero() {
						break
					}
					next = append(next, t.UTC().Format(time.RFC3339))
				}
				res.Fires, res.Next = &fires, &next
			}
			b, _ := json.Marshal(res)
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			if !res.Valid {
				return &exitError{code: 1, err: errors.New(res.Error)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&afterText, "after", "", "list fire times strictly after this RFC 3339 instant (default: now)")
	cmd.Flags().IntVarP(&n, "n", "n", 5, "how many fire times to list (0-1000)")
	cmd.Flags().StringVar(&zone, "time-zone", "", "IANA time zone of the expression, as CronSchedule spec.timeZone (default UTC)")
	return cmd
}
