// Command build-images writes the operator, workerd and pause images as OCI archives
// without a Docker engine or a registry (hack/ociimage), for `ctr images import`:
//
//	go run ./hack/build-images --out dist/images [--img REF] [--workerd-img REF]
//
// The workerd binary is the pinned one hack/install-workerd.sh installs.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/workerd-operator/workerd-operator/hack/ociimage"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

func main() {
	out := flag.String("out", "dist/images", "directory for the archives")
	img := flag.String("img", podcontract.DefaultOperatorImage, "operator image reference")
	wimg := flag.String("workerd-img", podcontract.DefaultWorkerdImage, "workerd image reference")
	flag.Parse()
	if err := run(*out, *img, *wimg); err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

func run(out, img, wimg string) error {
	root, err := toolchain.RepoRoot()
	if err != nil {
		return err
	}
	workerd, err := toolchain.Workerd()
	if err != nil {
		return err
	}
	a, err := ociimage.ProjectImages(root, out, workerd, img, wimg)
	if err != nil {
		return err
	}
	fmt.Println(a.Operator)
	fmt.Println(a.Workerd)
	fmt.Println(a.Pause)
	return nil
}
