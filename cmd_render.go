package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newRenderCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "render",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("render: not built yet")
		},
	}
}
