package ociimage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	bin := filepath.Join(out, "workerd-operator")
	pause := filepath.Join(out, "pause")
	for _, b := range [][2]string{{bin, "./cmd/workerd-operator"}, {pause, "./hack/pause"}} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", b[0], b[1])
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", b[1], err, o)
		}
	}
	a := &Archives{
		Operator: filepath.Join(out, "operator.tar"),
		Workerd:  filepath.Join(out, "workerd.tar"),
		Pause:    filepath.Join(out, "pause.tar"),
	}
	op, err := ParseDockerfile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return nil, err
	}
	img, err := FromStage(operatorRef, op, map[string]string{"/workerd-operator": bin})
	if err != nil {
		return nil, fmt.Errorf("Dockerfile: %w", err)
	}
	if err := img.WriteArchive(a.Operator); err != nil {
		return nil, err
	}
	wd, err := ParseDockerfile(filepath.Join(repoRoot, "Dockerfile.workerd"))
	if err != nil {
		return nil, err
	}
	img, err = FromStage(workerdRef, wd, map[string]string{"/usr/local/bin/workerd": workerdBin})
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
