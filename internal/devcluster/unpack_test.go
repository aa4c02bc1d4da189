package devcluster

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layerFile writes one uncompressed layer of the given entries.
func layerFile(t *testing.T, hs ...*tar.Header) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "layer.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, h := range hs {
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUnpackRulesAsContainerd: a hard link reaching a host file through a symbolic link
// of the image, or naming a link rather than a file, is refused; whiteouts named ".wh.",
// ".wh.." or ".wh..." remove nothing (they would remove a directory, the image's root or
// the whole image cache).
func TestUnpackRulesAsContainerd(t *testing.T) {
	host := t.TempDir()
	secret := filepath.Join(host, "shadow")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]*tar.Header{
		"hard link through a symbolic link": {
			{Name: "h", Typeflag: tar.TypeSymlink, Linkname: host},
			{Name: "stolen", Typeflag: tar.TypeLink, Linkname: "h/shadow"},
		},
		"hard link to a symbolic link": {
			{Name: "s", Typeflag: tar.TypeSymlink, Linkname: secret},
			{Name: "stolen", Typeflag: tar.TypeLink, Linkname: "s"},
		},
		"whiteout of nothing":   {{Name: "d/.wh.", Typeflag: tar.TypeReg}},
		"whiteout of dot":       {{Name: ".wh..", Typeflag: tar.TypeReg}},
		"whiteout of dot dot":   {{Name: ".wh...", Typeflag: tar.TypeReg}},
		"whiteout in a dir, ..": {{Name: "d/.wh...", Typeflag: tar.TypeReg}},
	}
	for name, hs := range cases {
		t.Run(name, func(t *testing.T) {
			cache := t.TempDir()
			root := filepath.Join(cache, "image")
			if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			keep := filepath.Join(cache, "other-image")
			if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := applyLayer(layerFile(t, hs...), root)
			if err == nil {
				t.Error("applied; want the entry refused")
			}
			if b, err := os.ReadFile(filepath.Join(root, "stolen")); err == nil && strings.Contains(string(b), "host secret") {
				t.Error("the image holds a host file")
			}
			for _, p := range []string{filepath.Join(root, "d"), keep} {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s removed: %v", p, err)
				}
			}
		})
	}
}
