package devcluster

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pullImage pulls image from its registry, as a kubelet would for an image volume
// (localhost and loopback registries over plain HTTP, credentials from the Docker
// config), and unpacks it once into <cache>/<manifest digest>; an image unpacked
// before is reused. A reference with a tag is resolved on every call, so a tag pushed
// again is pulled again; the layers are fetched only when the digest is new.
func pullImage(image, cache string) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", fmt.Errorf("reference: %w", err)
	}
	img, err := remote.Image(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return "", fmt.Errorf("pull: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("pull: %w", err)
	}
	dir := filepath.Join(cache, strings.ReplaceAll(digest.String(), ":", "-"))
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cache, ".rootfs-")
	if err != nil {
		return "", err
	}
	if err := unpackLayers(img, tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("%s: %w", digest, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil // unpacked meanwhile by another process
		}
		return "", err
	}
	return dir, nil
}

// unpackLayers applies img's layers in order onto root, with the whiteouts of the
// OCI image spec (applyEntry).
func unpackLayers(img v1.Image, root string) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		err = walkTar(rc, func(h *tar.Header, rel string, r io.Reader) error { return applyEntry(root, h, rel, r) })
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return nil
}
