package testenv

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/workerd-operator/workerd-operator/internal/bundleimage"
)

// BuildServer builds the Go main package in dir (a module of its own, such as a
// template's container_src) as the static binary file binary.
func BuildServer(dir, binary string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", binary, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", dir, err, b)
	}
	return nil
}

// ServerImage builds the Go main package in dir as a static binary and pushes an image
// holding only it, as /server, its CMD, to ref (what a Dockerfile building the package
// FROM scratch gives, the containers template's, without Docker or a base image). It
// returns ref pinned to the pushed digest and the binary's path.
func ServerImage(dir, ref string) (pinned, binary string, err error) {
	out, err := os.MkdirTemp("", "server-image-")
	if err != nil {
		return "", "", err
	}
	binary = filepath.Join(out, "server")
	if err := BuildServer(dir, binary); err != nil {
		return "", "", err
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", "", err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "server", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return "", "", err
	}
	if _, err := tw.Write(data); err != nil {
		return "", "", err
	}
	if err := tw.Close(); err != nil {
		return "", "", err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return "", "", err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return "", "", err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", "", err
	}
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Config.Cmd = []string{"/server"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return "", "", err
	}
	if err := bundleimage.Push(ref, img); err != nil {
		return "", "", err
	}
	pinned, err = bundleimage.Pinned(ref, img)
	return pinned, binary, err
}
