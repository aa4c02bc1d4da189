package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newSidecarCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "sidecar",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("sidecar: not built yet")
		},
	}
}
