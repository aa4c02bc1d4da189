package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/internal/imagecheck"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// maxLinkLines bounds the links printed: the kubelet keeps the last 2048 bytes of the
// log as the termination message (FallbackToLogsOnError), which status.lastFailure
// quotes, and each line is about 350 bytes.
const maxLinkLines = 3

// newImageCheckCommand: `workerd-operator check-image-volumes FIELD=DIR...`, the
// image-check init container of a pod with image volumes (podcontract.ImageCheckContainer).
func newImageCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   podcontract.ImageCheckCommand + " FIELD=DIR...",
		Short: "Refuse image volumes holding a symbolic link out of them (a pod's init container)",
		Long: "Walks each DIR (an image volume as the workerd container mounts it; FIELD names the\n" +
			"Worker's field, e.g. spec.assets=/etc/workerd/assets) without following links and exits 1\n" +
			"if a symbolic link is absolute or resolves outside DIR: workerd would read the file it\n" +
			"names (docs/security-policy.md, Image volumes).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runImageCheck(cmd.ErrOrStderr(), args) },
	}
}

func runImageCheck(out io.Writer, args []string) error {
	bad := 0
	for _, a := range args {
		field, dir, ok := strings.Cut(a, "=")
		if !ok || field == "" || dir == "" {
			return fmt.Errorf("%s: argument %q: want FIELD=DIR, e.g. spec.assets=%s", podcontract.ImageCheckCommand, a, podcontract.AssetsDir)
		}
		links, err := imagecheck.Check(dir)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", podcontract.ImageCheckCommand, field, err)
		}
		for _, l := range links {
			if bad < maxLinkLines {
				fmt.Fprintln(out, l.Message(field))
			}
			bad++
		}
		if len(links) == 0 {
			fmt.Fprintf(out, "%s: %s: no symbolic link leads out of the image\n", podcontract.ImageCheckCommand, field)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s: %d symbolic link(s) out of their image volume; workerd does not start", podcontract.ImageCheckCommand, bad)
	}
	return nil
}
