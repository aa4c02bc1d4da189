package render_test

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/imagecheck"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestAssetsSymlinkOutside: an asset image is the Worker author's. The pinned workerd's
// assets service follows a symbolic link out of the asset directory, absolute or
// relative (in a pod: to /etc/workerd/tls/tls.key, the namespace's internal-plane key,
// which workerd's own config needs), and serves the file. Here the links point at a
// file beside the rendered config. That is why a pod with image volumes starts with
// the image-check init container: imagecheck.Check refuses exactly this tree and
// accepts its link that stays inside. Should workerd stop following such links, the
// first half fails and the guard can be reconsidered.
func TestAssetsSymlinkOutside(t *testing.T) {
	dir := assetsDir(t, v1alpha1.WorkerAssets{}, map[string]string{"index.txt": "hello"}, false)
	secret := filepath.Join(dir, "tls.key")
	if err := os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	ad := filepath.Join(dir, podcontract.AssetsSubdir)
	for name, target := range map[string]string{"abs.txt": secret, "rel.txt": "../tls.key", "alias.txt": "index.txt"} {
		if err := os.Symlink(target, filepath.Join(ad, name)); err != nil {
			t.Fatal(err)
		}
	}
	base := startDir(t, testenv.WorkerdBinary(t), dir)
	for p, want := range map[string]string{"/abs.txt": "PRIVATE KEY", "/rel.txt": "PRIVATE KEY", "/alias.txt": "hello"} {
		res := get(t, base+p, nil)
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || string(b) != want {
			t.Errorf("GET %s: %d %q, want workerd to follow the link: 200 %q", p, res.StatusCode, b, want)
		}
	}

	links, err := imagecheck.Check(ad)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, l := range links {
		refused = append(refused, l.Path)
	}
	slices.Sort(refused)
	if !slices.Equal(refused, []string{"abs.txt", "rel.txt"}) {
		t.Errorf("imagecheck refused %v, want [abs.txt rel.txt] (alias.txt stays inside)", refused)
	}
}
