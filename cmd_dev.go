package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newDevCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("dev: not built yet")
		},
	}
}
