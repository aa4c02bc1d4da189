package bundleimage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAssetLinks: the image holds regular files only (tree.tar writes no link), so a
// symbolic link of the asset directory is packed as the file it names, as an upload
// would, when that file is inside the directory. A link out of it is refused naming
// the link and its target: packing would publish a file of the developer's machine
// (a key, a credentials file) in the image.
func TestAssetLinks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(outside, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"index.html": "hi", "css/site.css": "body{}"})
	for name, target := range map[string]string{"alias.html": "index.html", "css/again.html": "../index.html"} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	tr, n, err := assetTree(dir)
	if err != nil {
		t.Fatalf("links inside the directory: %v", err)
	}
	if n != 4 || string(tr.files["/assets/alias.html"]) != "hi" || string(tr.files["/assets/css/again.html"]) != "hi" {
		t.Errorf("%d files %v: want alias.html and css/again.html packed as index.html's bytes", n, tr.files)
	}

	for name, absolute := range map[string]bool{"abs.txt": true, "rel.txt": false} {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			writeTree(t, d, map[string]string{"index.html": "hi"})
			target, err := filepath.Rel(d, outside)
			if err != nil {
				t.Fatal(err)
			}
			if absolute {
				target = outside
			}
			if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
				t.Fatal(err)
			}
			_, _, err = assetTree(d)
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "outside the assets directory") {
				t.Fatalf("assetTree = %v, want an error naming %s and saying it leads outside the assets directory", err, name)
			}
		})
	}
}
