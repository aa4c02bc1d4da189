package imagecheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/failure"
)

// tree builds a directory of files (name -> content) and symbolic links
// (name -> "->target").
func tree(t *testing.T, entries map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, v := range entries {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(v, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestCheckRefusesLinksOut: links that leave the image's directory, whichever way, are
// found; the kernel would follow each of them out of a mount at root.
func TestCheckRefusesLinksOut(t *testing.T) {
	root := tree(t, map[string]string{
		"index.html":     "hi",
		"abs.txt":        "->/etc/workerd/tls/tls.key",
		"rel.txt":        "->../tls/tls.key",
		"deep/up.txt":    "->../../tls/tls.key",
		"self":           "->.",
		"via-self.txt":   "->self/../tls/tls.key", // lexically inside, out through the link
		"dirlink":        "->deep",
		"via-dir.txt":    "->dirlink/../../x", // deep/.. is root, then .. leaves it
		"abs-inside.txt": "->/index.html",     // absolute: resolved against the container's root
	})
	links, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Link{}
	for _, l := range links {
		got[l.Path] = l
	}
	for _, want := range []string{"abs.txt", "rel.txt", "deep/up.txt", "via-self.txt", "via-dir.txt", "abs-inside.txt"} {
		if _, ok := got[want]; !ok {
			t.Errorf("link %s (-> %s) not refused; refused: %v", want, mustReadlink(t, filepath.Join(root, want)), links)
		}
	}
	if len(got) != 6 {
		t.Errorf("refused %d links, want 6: %v", len(got), links)
	}
	if l := got["abs.txt"]; l.Target != "/etc/workerd/tls/tls.key" || !l.Absolute {
		t.Errorf("abs.txt: %+v, want its target and Absolute", l)
	}
}

// TestCheckAcceptsLinksInside: links that stay inside (also through other links), a
// dangling link and a loop are harmless: the kernel fails the last two in workerd too.
func TestCheckAcceptsLinksInside(t *testing.T) {
	root := tree(t, map[string]string{
		"index.html":        "hi",
		"alias.html":        "->index.html",
		"sub/page.html":     "->../index.html",
		"sub/deeper/x.html": "->../../sub/page.html",
		"docs":              "->sub",
		"via-docs.html":     "->docs/deeper/x.html",
		"dangling":          "->missing/file",
		"loop-a":            "->loop-b",
		"loop-b":            "->loop-a",
	})
	links, err := Check(root)
	if err != nil || len(links) != 0 {
		t.Fatalf("Check = %v, %v; want no link refused", links, err)
	}
}

// TestMessageNamesFieldAndFile: the line the init container prints names the Worker's
// field, the file in the image and its target, and carries the phrase
// internal/failure classifies as image_link_outside.
func TestMessageNamesFieldAndFile(t *testing.T) {
	m := Link{Path: "css/site.css", Target: "../tls/tls.key"}.Message("spec.assets.image")
	for _, want := range []string{"spec.assets.image", `"css/site.css"`, `"../tls/tls.key"`, failure.ImageLinkPhrase, "docs/security-policy.md"} {
		if !strings.Contains(m, want) {
			t.Errorf("message %q lacks %q", m, want)
		}
	}
}

func mustReadlink(t *testing.T, p string) string {
	s, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
