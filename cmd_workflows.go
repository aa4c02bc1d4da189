package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newWorkflowsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "workflows",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("workflows: not built yet")
		},
	}
}
