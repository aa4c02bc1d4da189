package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newManagerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "manager",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("manager: not built yet")
		},
	}
}
