package devcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// ImageMapping maps container images to local binaries (config/dev/images.yaml).
type ImageMapping struct {
	// Source is the file the mapping was read from (for error messages).
	Source string        `json:"-"`
	Images []ImageBinary `json:"images"`
	// Volumes stand for the images pods mount as image volumes (see ImageDirectory).
	Volumes []ImageDirectory `json:"volumes,omitempty"`

	mu       sync.Mutex
	resolved map[string]string
	dirs     map[string]string
}

// ImageBinary is one entry: Image is a reference without tag/digest (exact match) or a
// path.Match pattern containing `*`; Binary is `$workerd`, `$operator`, `$versitygw`, a path (absolute or
// relative to the repository root) or a name in PATH.
type ImageBinary struct {
	Image  string `json:"image"`
	Binary string `json:"binary"`
}

// LoadImageMapping reads an image mapping file. Errors name the file and the entry.
func LoadImageMapping(file string) (*ImageMapping, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("devcluster: image mapping: %w", err)
	}
	m := &ImageMapping{}
	if err := yaml.UnmarshalStrict(b, m); err != nil {
		return nil, fmt.Errorf("devcluster: image mapping %s: %w", file, err)
	}
	m.Source = file
	for i, e := range m.Images {
		if e.Image == "" || e.Binary == "" {
			return nil, fmt.Errorf("devcluster: image mapping %s: images[%d] needs both image and binary", file, i)
		}
	}
	for i, e := range m.Volumes {
		if e.Image == "" || (e.Directory == "") == (e.Archive == "") {
			return nil, fmt.Errorf("devcluster: image mapping %s: volumes[%d] needs image and exactly one of directory and archive", file, i)
		}
	}
	return m, nil
}

// stripTag removes ":tag" and "@digest" from an image reference.
func stripTag(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// Binary returns the local binary standing for image, building or installing it on
// first use ($workerd, $operator, $versitygw). The error names the image and the mapping file.
func (m *ImageMapping) Binary(image string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.resolved[image]; ok {
		return p, nil
	}
	for _, e := range m.Images {
		if !matchImage(e.Image, image) {
			continue
		}
		p, err := resolveBinary(e.Binary, image)
		if err != nil {
			return "", fmt.Errorf("image %q (mapped to %q in %s): %w", image, e.Binary, m.Source, err)
		}
		if m.resolved == nil {
			m.resolved = map[string]string{}
		}
		m.resolved[image] = p
		return p, nil
	}
	return "", fmt.Errorf("image %q has no local binary in the image mapping %s (the local cluster runs images as local processes; add an entry)", image, m.Source)
}

var (
	operatorOnce sync.Once
	operatorBin  string
	operatorErr  error
)

// OperatorBinary returns the project's own binary: WORKERD_OPERATOR_BIN if set, else
// `go build ./cmd/workerd-operator` into <cache>/bin/workerd-operator (rebuilt once per
// process, so a test run uses the current source).
func OperatorBinary() (string, error) {
	operatorOnce.Do(func() {
		if p := os.Getenv("WORKERD_OPERATOR_BIN"); p != "" {
			operatorBin = p
			return
		}
		root, err := testenv.RepoRoot()
		if err != nil {
			operatorErr = err
			return
		}
		out := filepath.Join(testenv.CacheDir(), "bin", "workerd-operator")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/workerd-operator")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			operatorErr = fmt.Errorf("go build of the operator binary: %v\n%s", err, b)
			return
		}
		operatorBin = out
	})
	return operatorBin, operatorErr
}

// resolveBinary is the local binary b stands for as the entrypoint of image: $workerd
// is the workerd release the image's tag names (installed from npm on first use), the
// pinned one for any other tag.
func resolveBinary(b, image string) (string, error) {
	switch b {
	case "$workerd":
		if tag := podcontract.ImageWorkerdVersion(image); tag != "" {
			return toolchain.WorkerdAt(tag)
		}
		return testenv.Workerd()
	case "$operator":
		return OperatorBinary()
	case "$versitygw":
		return toolchain.S3Server()
	}
	if filepath.IsAbs(b) {
		return b, nil
	}
	if strings.Contains(b, "/") {
		root, err := testenv.RepoRoot()
		if err != nil {
			return "", err
		}
		return filepath.Join(root, b), nil
	}
	return exec.LookPath(b)
}
