// Command build-installer writes the install bundle (dist/install.yaml): the kustomize
// build of config/default with the operator and workerd images set.
//
//	go run ./hack/build-installer --img <operator image> --workerd-img <workerd image>
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	defaultOperatorImage = "ghcr.io/workerd-operator/workerd-operator:dev"
	defaultWorkerdImage  = "ghcr.io/workerd-operator/workerd:1.20261117.1"
)

func main() {
	img := flag.String("img", defaultOperatorImage, "operator image (manager and sidecar)")
	workerdImg := flag.String("workerd-img", defaultWorkerdImage, "workerd image")
	dir := flag.String("dir", "config/default", "kustomization to build")
	flag.Parse()

	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-installer:", err)
		os.Exit(1)
	}
	out, err := res.AsYaml()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-installer:", err)
		os.Exit(1)
	}
	s := strings.ReplaceAll(string(out), defaultOperatorImage, *img)
	if *workerdImg != defaultWorkerdImage {
		s = strings.ReplaceAll(s, "--workerd-image="+defaultWorkerdImage, "--workerd-image="+*workerdImg)
	}
	fmt.Print(s)
}
