package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

func newImportCommand() *cobra.Command {
	o := wrangler.Options{}
	var outDir string
	cmd := &cobra.Command{
		Use:   "import [DIR|wrangler.jsonc|wrangler.json|wrangler.toml] [--env NAME] [--bundle DIR] [-o DIR]",
		Short: "Write the Kubernetes objects for a wrangler project",
		Long: `import reads a wrangler project (a directory, default ".", or its wrangler.json,
wrangler.jsonc or wrangler.toml) and writes the objects that run it: the Worker, a
DurableObjectNamespace per Durable Object class, a Workflow per workflow and a
CronSchedule for its cron triggers (docs/import.md says what maps to what). Without -o
they go to stdout as one YAML stream; with -o DIR one file per object plus a
kustomization.yaml.

The code: with --bundle DIR (the output of ` + "`npx wrangler deploy --dry-run --outdir DIR`" + `)
every file there becomes an inline module; without it, main must be a single
self-contained JavaScript file.

Every configuration key that cannot be mapped is listed with its path and why, and
import fails unless --allow-unsupported (the Worker then carries the list in the
annotation ` + wrangler.UnsupportedAnnotation + `). Secrets named in .dev.vars or
secrets.required become secretKeyRef bindings to a Secret "<worker>-secrets" that you
create; their values are never read.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Path = "."
			if len(args) == 1 {
				o.Path = args[0]
			}
			return runImport(o, outDir, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Env, "env", "", "the [env.NAME] section to import (default: the top level)")
	f.StringVar(&o.Bundle, "bundle", "", "directory written by wrangler deploy --dry-run --outdir: every file becomes a module")
	f.StringVarP(&outDir, "output-dir", "o", "", "write one file per object and a kustomization.yaml into this directory")
	f.BoolVar(&o.AllowUnsupported, "allow-unsupported", false, "import despite keys that cannot be mapped (listed in an annotation)")
	f.StringVar(&o.R2Endpoint, "r2-endpoint", "", "S3-compatible endpoint URL of the R2Buckets that r2_buckets bind (docs/r2.md); without it no R2Bucket is written")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the objects (default: none, kubectl's)")
	return cmd
}

func runImport(o wrangler.Options, outDir string, stdout, stderr io.Writer) error {
	res, err := wrangler.Import(o)
	if err != nil {
		return err
	}
	for _, i := range res.Unsupported {
		fmt.Fprintf(stderr, "import: unsupported, left out: %s\n", i)
	}
	for _, i := range res.Ignored {
		fmt.Fprintf(stderr, "import: ignored: %s\n", i)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stderr, "import: note: %s\n", n)
	}
	if res.Secret != "" {
		fmt.Fprintf(stderr, "import: create Secret %s with keys %v, e.g. kubectl create secret generic %s --from-env-file=.dev.vars\n",
			res.Secret, res.SecretKeys, res.Secret)
	}
	if outDir == "" {
		return res.WriteYAML(stdout)
	}
	files, err := res.WriteDir(outDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "import: wrote %d files to %s (kubectl apply -k %s)\n", len(files), outDir, outDir)
	return nil
}
