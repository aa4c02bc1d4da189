package devcluster

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// ImageDirectory is one image that pods mount as an image volume (`volumes[].image`).
// Image is matched as in ImageBinary. Exactly one of Directory (the image's filesystem as
// a directory on this machine) and Archive (an OCI image layout: a tar file such as
// hack/ociimage writes, or a directory holding `oci-layout`) is set; an archive is
// unpacked once into <cache>/image-volumes/<manifest digest>. Relative paths are relative
// to the repository root.
type ImageDirectory struct {
	Image     string `json:"image"`
	Directory string `json:"directory,omitempty"`
	Archive   string `json:"archive,omitempty"`
}

// matchImage reports whether the mapping entry pattern stands for image.
func matchImage(pattern, image string) bool {
	if strings.Contains(pattern, "*") {
		ok, _ := path.Match(pattern, image)
		return ok
	}
	return stripTag(image) == pattern
}

// Directory returns the host directory holding the filesystem of image, for an image
// volume: a mapped directory, a mapped archive (unpacked on first use), else the image
// pulled from its registry and unpacked by digest. The error names the image and the
// mapping file.
func (m *ImageMapping) Directory(image string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.dirs[image]; ok {
		return p, nil
	}
	for _, e := range m.Volumes {
		if !matchImage(e.Image, image) {
			continue
		}
		p, err := e.resolve(image)
		if err != nil {
			return "", fmt.Errorf("image volume %q (in %s): %w", image, m.Source, err)
		}
		if m.dirs == nil {
			m.dirs = map[string]string{}
		}
		m.dirs[image] = p
		return p, nil
	}
	// Not mapped: pull it from its registry (e.g. the local one `make dev` runs).
	p, err := pullImage(image, filepath.Join(testenv.CacheDir(), "image-volumes"))
	if err != nil {
		return "", fmt.Errorf("image volume %q: not in the image mapping %s's volumes, and pulling it failed: %w", image, m.Source, err)
	}
	if strings.Contains(image, "@") {
		if m.dirs == nil {
			m.dirs = map[string]string{}
		}
		m.dirs[image] = p // a digest names the same files forever
	}
	return p, nil
}

func (e ImageDirectory) resolve(image string) (string, error) {
	if (e.Directory == "") == (e.Archive == "") {
		return "", errors.New("the entry needs exactly one of directory and archive")
	}
	p := e.Directory
	if p == "" {
		p = e.Archive
	}
	if !filepath.IsAbs(p) {
		root, err := testenv.RepoRoot()
		if err != nil {
			return "", err
		}
		p = filepath.Join(root, p)
	}
	if e.Directory != "" {
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			return "", fmt.Errorf("directory %s: not a directory (%v)", p, err)
		}
		return p, nil
	}
	return unpackImage(p, image, filepath.Join(testenv.CacheDir(), "image-volumes"))
}

// unpackImage unpacks the image of an OCI image layout (tar file or directory) into
// <cache>/<manifest digest> and returns that directory; an image unpacked before is
// reused.
func unpackImage(archive, image, cache string) (string, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	layout := archive
	if st, err := os.Stat(archive); err != nil {
		return "", err
	} else if !st.IsDir() {
		tmp, err := os.MkdirTemp(cache, ".layout-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		if err := extractTar(archive, tmp); err != nil {
			return "", fmt.Errorf("archive %s: %w", archive, err)
		}
		layout = tmp
	}
	digest, layers, err := readLayout(layout, image)
	if err != nil {
		return "", fmt.Errorf("OCI image layout %s: %w", archive, err)
	}
	dir := filepath.Join(cache, strings.ReplaceAll(digest, ":", "-"))
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(cache, ".rootfs-")
	if err != nil {
		return "", err
	}
	for _, l := range layers {
		if err := applyLayer(filepath.Join(layout, "blobs", l.algo(), l.hex()), tmp); err != nil {
			os.RemoveAll(tmp)
			return "", fmt.Errorf("OCI image layout %s: layer %s: %w", archive, l, err)
		}
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

// blobDigest is "sha256:<hex>".
type blobDigest string

func (d blobDigest) algo() string { a, _, _ := strings.Cut(string(d), ":"); return a }
func (d blobDigest) hex() string  { _, h, _ := strings.Cut(string(d), ":"); return h }

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      blobDigest        `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// readLayout picks the layout's manifest for image (the one annotated with its name, or
// the only one) and returns its digest and its layers in order.
func readLayout(layout, image string) (string, []blobDigest, error) {
	var index struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	if err := readJSON(filepath.Join(layout, "index.json"), &index); err != nil {
		return "", nil, err
	}
	var pick *ociDescriptor
	for i, d := range index.Manifests {
		if d.Annotations["io.containerd.image.name"] == image || d.Annotations["org.opencontainers.image.ref.name"] == image {
			pick = &index.Manifests[i]
		}
	}
	if pick == nil && len(index.Manifests) == 1 {
		pick = &index.Manifests[0]
	}
	if pick == nil {
		return "", nil, fmt.Errorf("index.json has %d manifests and none is named %s", len(index.Manifests), image)
	}
	if !strings.HasSuffix(pick.MediaType, "manifest.v1+json") {
		return "", nil, fmt.Errorf("manifest %s has media type %s (an image manifest is needed)", pick.Digest, pick.MediaType)
	}
	var manifest struct {
		Layers []ociDescriptor `json:"layers"`
	}
	if err := readJSON(filepath.Join(layout, "blobs", pick.Digest.algo(), pick.Digest.hex()), &manifest); err != nil {
		return "", nil, err
	}
	layers := make([]blobDigest, 0, len(manifest.Layers))
	for _, l := range manifest.Layers {
		if !validDigest(l.Digest) {
			return "", nil, fmt.Errorf("layer digest %q", l.Digest)
		}
		layers = append(layers, l.Digest)
	}
	if !validDigest(pick.Digest) {
		return "", nil, fmt.Errorf("manifest digest %q", pick.Digest)
	}
	return string(pick.Digest), layers, nil
}

func validDigest(d blobDigest) bool {
	b, err := hex.DecodeString(d.hex())
	return d.algo() == "sha256" && err == nil && len(b) == sha256.Size
}

func readJSON(file string, v any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(file), err)
	}
	return nil
}

// extractTar writes the regular files and directories of a tar file (an OCI layout
// archive) under dir.
func extractTar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return walkTar(f, func(h *tar.Header, rel string, r io.Reader) error {
		switch h.Typeflag {
		case tar.TypeDir:
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		case tar.TypeReg:
			return writeFile(filepath.Join(dir, rel), r, 0o644)
		}
		return nil
	})
}

// applyLayer applies one layer (a tar, gzip-compressed or not) onto root, with the
// whiteouts of the OCI image spec.
func applyLayer(blob, root string) error {
	f, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	}
	return walkTar(r, func(h *tar.Header, rel string, r io.Reader) error {
		return applyEntry(root, h, rel, r)
	})
}

// walkTar calls fn for every entry with its name cleaned and relative; names leaving
// the root are an error.
func walkTar(r io.Reader, fn func(h *tar.Header, rel string, r io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		rel := filepath.Clean(strings.TrimPrefix(h.Name, "/"))
		if rel == "." {
			continue
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("entry %q leaves the root", h.Name)
		}
		if err := fn(h, rel, tr); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
}

// applyEntry writes one layer entry under root. A parent that is a symbolic link is an
// error, so that no entry is written outside root through a link of an earlier layer.
func applyEntry(root string, h *tar.Header, rel string, r io.Reader) error {
	if err := noLinkParents(root, rel); err != nil {
		return err
	}
	dst := filepath.Join(root, rel)
	base := filepath.Base(rel)
	if base == ".wh..wh..opq" { // opaque: the directory hides what lower layers put in it
		ents, _ := os.ReadDir(filepath.Dir(dst))
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(filepath.Dir(dst), e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if name, ok := strings.CutPrefix(base, ".wh."); ok {
		// As containerd: the whited-out name is one entry of this directory, never
		// "", "." or ".." (which would remove the directory, the root or above it).
		if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
			return fmt.Errorf("whiteout %q names no entry of its directory", base)
		}
		return os.RemoveAll(filepath.Join(filepath.Dir(dst), name))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(h.Mode).Perm()
	switch h.Typeflag {
	case tar.TypeDir:
		if st, err := os.Lstat(dst); err == nil && st.IsDir() {
			return os.Chmod(dst, mode|0o700)
		}
		_ = os.RemoveAll(dst)
		return os.Mkdir(dst, mode|0o700)
	case tar.TypeReg:
		_ = os.RemoveAll(dst)
		return writeFile(dst, r, mode|0o600)
	case tar.TypeSymlink:
		_ = os.RemoveAll(dst)
		return os.Symlink(h.Linkname, dst)
	case tar.TypeLink:
		return hardLink(root, h.Linkname, dst)
	}
	return nil // devices, fifos: nothing a Worker bundle needs
}

// hardLink links dst to the earlier entry linkname names: a regular file of this
// image, reached through no symbolic link (a link through one could name any file of
// the host's file system, which the image check would then pass as the image's).
func hardLink(root, linkname, dst string) error {
	target := filepath.Clean(strings.TrimPrefix(linkname, "/"))
	if target == "." || target == ".." || strings.HasPrefix(target, "../") {
		return fmt.Errorf("hard link to %q leaves the root", linkname)
	}
	if err := noLinkParents(root, target); err != nil {
		return fmt.Errorf("hard link to %q: %w", linkname, err)
	}
	st, err := os.Lstat(filepath.Join(root, target))
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("hard link to %q: not a regular file of the image (%v)", linkname, err)
	}
	_ = os.RemoveAll(dst)
	return os.Link(filepath.Join(root, target), dst)
}

func noLinkParents(root, rel string) error {
	p := root
	parts := strings.Split(filepath.Dir(rel), string(filepath.Separator))
	for _, part := range parts {
		if part == "." {
			break
		}
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if err != nil {
			return nil // not there yet: created as a directory
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("parent %s is a symbolic link", strings.TrimPrefix(p, root+"/"))
		}
	}
	return nil
}

func writeFile(dst string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
