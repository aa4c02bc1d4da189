package ociimage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PauseRef is the sandbox image the real node's containerd pins (pinned_images.sandbox).
const PauseRef = "localhost/workerd-operator/pause:realnode"

// Archives are the OCI archives ProjectImages writes.
type Archives struct {
	Operator, Workerd, Pause string
}

// ProjectImages builds the operator binary (as Dockerfile's build stage does:
// CGO_ENABLED=0, -trimpath, -ldflags "-s -w") and the pause binary, then writes
// <out>/operator.tar from Dockerfile, <out>/workerd.tar from Dockerfile.workerd with
// workerdBin (the pinned workerd hack/install-workerd.sh installs) and <out>/pause.tar.
func ProjectImages(repoRoot, out, workerdBin, operatorRef, workerdRef string) (*Archives, error) {
	a := &Archives{
		Operator: filepath.Join(out, "operator.tar"),
		Workerd:  filepath.Join(out, "workerd.tar"),
		Pause:    filepath.Join(out, "pause.tar"),
	}
	if err := OperatorImage(repoRoot, a.Operator, operatorRef); err != nil {
		return nil, err
	}
	pause := filepath.Join(out, "pause")
	if err := goBuild(repoRoot, pause, "./hack/pause"); err != nil {
		return nil, err
	}
	wd, err := ParseDockerfile(filepath.Join(repoRoot, "Dockerfile.workerd"))
	if err != nil {
		return nil, err
	}
	img, err := FromStage(workerdRef, wd, map[string]string{"/usr/local/bin/workerd": workerdBin})
	if err != nil {
		return nil, fmt.Errorf("Dockerfile.workerd: %w", err)
	}
	if err := img.WriteArchive(a.Workerd); err != nil {
		return nil, err
	}
	base, env, err := BaseFiles("gcr.io/distroless/static-debian12")
	if err != nil {
		return nil, err
	}
	p := &Image{Ref: PauseRef, Env: env, Entrypoint: []string{"/pause"}, User: "65535:65535",
		Layers: [][]File{base, {{Path: "/pause", Mode: 0o755, HostPath: pause}}}}
	if err := p.WriteArchive(a.Pause); err != nil {
		return nil, err
	}
	return a, nil
}

// OperatorImage builds the operator binary of the source tree at repoRoot and writes the
// image its Dockerfile describes, tagged ref, as the OCI archive archive. repoRoot may be
// another release's tree: only its Dockerfile and its cmd/workerd-operator are used.
func OperatorImage(repoRoot, archive, ref string) error {
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	bin := strings.TrimSuffix(archive, ".tar") + ".bin"
	if err := goBuild(repoRoot, bin, "./cmd/workerd-operator"); err != nil {
		return err
	}
	op, err := ParseDockerfile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return err
	}
	img, err := FromStage(ref, op, map[string]string{"/workerd-operator": bin})
	if err != nil {
		return fmt.Errorf("Dockerfile: %w", err)
	}
	return img.WriteArchive(archive)
}

// goBuild builds pkg of the module at dir into out as Dockerfile's build stage does.
func goBuild(dir, out, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, o)
	}
	return nil
}
