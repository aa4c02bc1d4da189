// Package imagecheck verifies a Worker's image volumes (spec.source.image,
// spec.assets.image) before workerd starts: an image is the Worker author's, and a
// symbolic link in it that leads out of its directory would make workerd read, as a
// module or an asset, whatever file of the workerd container it names (the
// namespace's internal TLS key among them). The pod's image-check init container
// (podcontract.ImageCheckContainer, `workerd-operator check-image-volumes`) runs
// Check on every image mount and refuses to let the pod start while one such link
// exists; image volumes are read-only and fixed for the pod's life, so a check at
// start holds. docs/security-policy.md "Image volumes".
package imagecheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/workerd-operator/workerd-operator/internal/failure"
)

// Link is a symbolic link of an image volume that leads out of it.
type Link struct {
	// Path is the link, relative to the volume's root, slash-separated.
	Path string
	// Target is what the link holds (readlink).
	Target string
	// Absolute: Target is an absolute path, which the kernel resolves against the
	// container's root, never the image's.
	Absolute bool
}

// Message is the line the init container prints for l in the volume of field (e.g.
// "spec.assets.image"); internal/failure classifies it as image_link_outside by
// failure.ImageLinkPhrase.
func (l Link) Message(field string) string {
	how := "which resolves outside the image's directory"
	if l.Absolute {
		how = "an absolute path, resolved against the workerd container's root"
	}
	return fmt.Sprintf("%s: %q %s (to %q, %s); workerd would read the file it names. "+
		"Remove the link or make it relative and inside the image (see docs/security-policy.md)",
		field, l.Path, failure.ImageLinkPhrase, l.Target, how)
}

// Check walks root without following links and returns every symbolic link that is
// absolute or, resolved from where it is (through the tree's other links), leads out
// of root, in walk order. A link that resolves inside root, dangles or loops is
// harmless (the kernel fails the last two in workerd too). Directories the walk
// cannot read are skipped: the check runs as workerd's user, which cannot read them
// either. Errors: root cannot be opened.
func Check(root string) ([]Link, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Link
	err = fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) && p != "." {
				return fs.SkipDir
			}
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := r.Readlink(p)
		if err != nil {
			return err
		}
		if path.IsAbs(target) {
			out = append(out, Link{Path: p, Target: target, Absolute: true})
		} else if !resolvesInside(r, p) {
			out = append(out, Link{Path: p, Target: target})
		}
		return nil
	})
	return out, err
}

// resolvesInside reports whether the link p, resolved as the kernel would from its
// directory, stays under r. os.Root follows links component by component and refuses
// any step out of the root; an error the kernel would also give inside the root
// (missing, not a directory, a loop, no permission) means the link leads nowhere.
func resolvesInside(r *os.Root, p string) bool {
	_, err := r.Stat(p)
	return err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}
