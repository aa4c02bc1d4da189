package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newCronCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cron",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("cron: not built yet")
		},
	}
}
