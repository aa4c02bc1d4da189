package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/internal/bundleimage"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// imageOptions are the flags of `import --image`.
type imageOptions struct {
	push    bool
	archive string
}

func newImportCommand() *cobra.Command {
	o := wrangler.Options{}
	var outDir string
	var imgOpts imageOptions
	cmd := &cobra.Command{
		Use:   "import [DIR|wrangler.jsonc|wrangler.json|wrangler.toml] [--env NAME] [--bundle DIR] [--image REF --push|--image-archive FILE] [-o DIR]",
		Short: "Write the Kubernetes objects for a wrangler project",
		Long: `import reads a wrangler project (a directory, default ".", or its wrangler.json,
wrangler.jsonc or wrangler.toml) and writes the objects that run it: the Worker, a
DurableObjectNamespace per Durable Object class, a Workflow per workflow and a
CronSchedule for its cron triggers (docs/deploy.md says what maps to what). Without -o
they go to stdout as one YAML stream; with -o DIR one file per object plus a
kustomization.yaml.

The code: with --bundle DIR (the output of ` + "`npx wrangler deploy --dry-run --outdir DIR`" + `)
every file there becomes an inline module; without it, main must be a single
self-contained JavaScript file. Inline modules stop at about 1 MiB (the object must fit
etcd): with --image REF every module, the asset directory and a manifest go into an OCI
image instead (built here, no container engine), pushed to REF with --push (localhost
registries over plain HTTP, others with your docker login) and/or written as an OCI
layout archive with --image-archive FILE; the Worker's spec.source.image then names
the image by digest (REF's repository@sha256:...), so every new bundle rolls out.
` + "`make dev`" + ` runs a registry at localhost:5001 (docs/deploy.md).

A project with assets (wrangler's assets.directory) gets spec.assets: html_handling,
not_found_handling, run_worker_first and the binding, plus the text of the directory's
_headers and _redirects; the pods read the files from the --image (under /assets) or
from an image of your own named by --assets-image REF (docs/assets.md).

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
			if o.Image == "" && (imgOpts.push || imgOpts.archive != "") {
				return fmt.Errorf("--push and --image-archive need --image REF")
			}
			if o.Image != "" && !imgOpts.push && imgOpts.archive == "" {
				return fmt.Errorf("--image needs --push or --image-archive FILE (or both)")
			}
			return runImport(o, imgOpts, outDir, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Env, "env", "", "the [env.NAME] section to import (default: the top level)")
	f.StringVar(&o.Bundle, "bundle", "", "directory written by wrangler deploy --dry-run --outdir: every file becomes a module")
	f.StringVarP(&outDir, "output-dir", "o", "", "write one file per object and a kustomization.yaml into this directory")
	f.BoolVar(&o.AllowUnsupported, "allow-unsupported", false, "import despite keys that cannot be mapped (listed in an annotation)")
	f.StringVar(&o.R2Endpoint, "r2-endpoint", "", "S3-compatible endpoint URL of the R2Buckets that r2_buckets bind (docs/r2.md); without it no R2Bucket is written")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the objects (default: none, kubectl's)")
	f.StringVar(&o.DispatchNamespace, "dispatch-namespace", "", "make the Worker a user Worker of this dispatch namespace (spec.dispatchNamespace), as wrangler deploy --dispatch-namespace (docs/dispatch.md)")
	f.StringToStringVar(&o.ContainerImages, "container-image", nil, "CLASS=REF: the built image of a containers[] entry whose image is a Dockerfile (docs/containers.md); repeatable")
	f.StringVar(&o.Image, "image", "", "pack the bundle and assets into an OCI image REF and point spec.source.image at it (by digest)")
	f.BoolVar(&imgOpts.push, "push", false, "push the --image to its registry")
	f.StringVar(&imgOpts.archive, "image-archive", "", "write the --image as an OCI image layout tar file")
	f.StringVar(&o.AssetsImage, "assets-image", "", "image holding the assets directory's files under /assets, for a project with assets (spec.assets.image; default: the --image)")
	return cmd
}

func runImport(o wrangler.Options, img imageOptions, outDir string, stdout, stderr io.Writer) error {
	res, err := wrangler.Import(o)
	if err != nil {
		return err
	}
	if res.Image != nil {
		if err := packImage(res, o.Image, img, stderr); err != nil {
			return err
		}
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
	fmt.Fprintf(stderr, "import: wrote %d files to %s (kubectl apply --server-side -k %s)\n", len(files), outDir, outDir)
	return nil
}

// packImage builds the bundle image, pushes and/or archives it, and points the Worker
// at it by digest.
func packImage(res *wrangler.Result, ref string, o imageOptions, stderr io.Writer) error {
	pinned, m, err := bundleimage.Publish(*res.Image, ref, o.push, o.archive)
	if err != nil {
		return err
	}
	if o.archive != "" {
		fmt.Fprintf(stderr, "import: wrote image %s to %s\n", ref, o.archive)
	}
	if o.push {
		fmt.Fprintf(stderr, "import: pushed %s\n", ref)
	}
	assets := 0
	if m.Assets != nil {
		assets = m.Assets.Files
	}
	fmt.Fprintf(stderr, "import: image %s: %d modules, %d asset files\n", pinned, len(m.Modules), assets)
	res.SetImage(pinned)
	return nil
}
