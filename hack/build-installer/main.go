// Command build-installer writes the install bundle (dist/install.yaml) to stdout: the
// kustomize build of config/default with the operator and workerd images set.
//
//	go run ./hack/build-installer --img <operator image> --workerd-img <workerd image>
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/workerd-operator/workerd-operator/internal/installer"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

func main() {
	img := flag.String("img", installer.DefaultOperatorImage, "operator image (manager and sidecar)")
	workerdImg := flag.String("workerd-img", installer.DefaultWorkerdImage, "workerd image")
	flag.Parse()
	root, err := toolchain.RepoRoot()
	if err == nil {
		var out []byte
		if out, err = installer.Build(root, *img, *workerdImg); err == nil {
			_, err = os.Stdout.Write(out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-installer:", err)
		os.Exit(1)
	}
}
