package bundleimage

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Publish builds b's image, writes it to archive (an OCI layout tar; "" for none) and
// pushes it to ref when push is set, and returns the digest-pinned reference (Pinned)
// and the image's manifest.
func Publish(b Bundle, ref string, push bool, archive string) (string, *Manifest, error) {
	img, m, err := Build(b)
	if err != nil {
		return "", nil, err
	}
	pinned, err := Pinned(ref, img)
	if err != nil {
		return "", nil, err
	}
	if archive != "" {
		if err := WriteArchive(archive, ref, img); err != nil {
			return "", nil, err
		}
	}
	if push {
		if err := Push(ref, img); err != nil {
			return "", nil, err
		}
	}
	return pinned, m, nil
}

// Pinned returns ref with its tag replaced by img's manifest digest
// ("host/repo@sha256:..."): a Worker pinned so names exactly this bundle, and a new
// push gives a new reference and so a new rollout.
func Pinned(ref string, img v1.Image) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return r.Context().Name() + "@" + d.String(), nil
}

// Push writes img to ref with the credentials of the Docker config (docker login);
// localhost, loopback and private-network registries are reached over plain HTTP (as
// go-containerregistry does for them), others over HTTPS.
func Push(ref string, img v1.Image) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := remote.Write(r, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// WriteArchive writes img as an OCI image layout tar file (what `ctr images import`
// and the local cluster's image mapping read), its manifest annotated with ref.
func WriteArchive(file, ref string, img v1.Image) error {
	tmp, err := os.MkdirTemp(filepath.Dir(file), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return err
	}
	return tarDir(tmp, file)
}

// tarDir writes the files of dir into a tar file, sorted, with fixed times.
func tarDir(dir, file string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range paths {
		if err := addFile(tw, dir, p); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, dir, p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(dir, p)
	h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Typeflag: tar.TypeReg, Size: st.Size()}
	if st.IsDir() {
		h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		return tw.WriteHeader(h)
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}
