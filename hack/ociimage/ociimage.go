// Package ociimage assembles the project's container images without a Docker engine and
// without pulling a base image: it reads the final stage of a Dockerfile (Dockerfile,
// Dockerfile.workerd), stands in a locally assembled layer for its distroless base, adds
// the files the stage COPYs from files the caller built (the operator binary, the pinned
// workerd from npm), and writes an OCI image archive that `ctr images import` loads.
//
// The Dockerfiles stay the source of truth: the image gets the stage's USER, ENTRYPOINT
// and COPY destinations, and Build fails when the stage names a base, a COPY or an
// instruction this package does not know how to reproduce.
//
// Bases:
//   - gcr.io/distroless/static-debian12[:nonroot]: /etc/passwd and /etc/group with root,
//     nobody and nonroot (65532), /etc/nsswitch.conf, the CA bundle, /tmp (1777) and
//     /home/nonroot; the PATH and SSL_CERT_FILE distroless sets.
//   - gcr.io/distroless/cc-debian12[:nonroot]: the same plus glibc (Debian's libc6 files
//     of this machine: the loader, libc, libm, libdl, librt, libpthread), which the
//     workerd binary links.
package ociimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Stage is the final stage of a Dockerfile: what the image built from it holds.
type Stage struct {
	Base       string            // FROM of the last stage, ARGs expanded
	Copies     []Copy            // COPY instructions of the last stage, in order
	User       string            // USER
	Entrypoint []string          // ENTRYPOINT (exec form)
	Args       map[string]string // ARG defaults (global and of the stage)
}

// Copy is one COPY of the final stage.
type Copy struct {
	From string // --from= stage, "" for the build context
	Src  string
	Dest string
}

// ParseDockerfile reads a Dockerfile and returns its final stage. Only the instructions
// the project's Dockerfiles use in a final stage are accepted there (FROM, ARG, COPY,
// USER, ENTRYPOINT); anything else is an error so that a new instruction cannot be
// silently left out of the image.
func ParseDockerfile(file string) (*Stage, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	// Join continuation lines, drop comments.
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	args := map[string]string{}
	var st *Stage
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			if _, seen := args[k]; !seen || v != "" {
				args[k] = v
			}
		case "FROM":
			base, _, _ := strings.Cut(rest, " ")
			st = &Stage{Base: expand(base, args), Args: args}
		default:
			if st == nil {
				return nil, fmt.Errorf("%s: %s before FROM", file, instr)
			}
			switch strings.ToUpper(instr) {
			case "COPY":
				c := Copy{}
				f := strings.Fields(rest)
				for len(f) > 0 && strings.HasPrefix(f[0], "--") {
					if v, ok := strings.CutPrefix(f[0], "--from="); ok {
						c.From = v
					} else {
						return nil, fmt.Errorf("%s: COPY option %s is not supported", file, f[0])
					}
					f = f[1:]
				}
				if len(f) < 2 {
					return nil, fmt.Errorf("%s: COPY %q: want a source and a destination", file, rest)
				}
				c.Src, c.Dest = strings.Join(f[:len(f)-1], " "), f[len(f)-1]
				st.Copies = append(st.Copies, c)
			case "USER":
				st.User = rest
			case "ENTRYPOINT":
				if err := json.Unmarshal([]byte(rest), &st.Entrypoint); err != nil {
					return nil, fmt.Errorf("%s: ENTRYPOINT must be the exec form: %w", file, err)
				}
			default:
				// RUN, WORKDIR, ...: a build stage. Only the final stage must be
				// reproducible; if this is the final one, the empty base is rejected below.
				st.Copies, st.User, st.Entrypoint, st.Base = nil, "", nil, ""
			}
		}
	}
	if st == nil || st.Base == "" {
		return nil, fmt.Errorf("%s: the final stage uses instructions other than COPY, USER and ENTRYPOINT", file)
	}
	return st, nil
}

func expand(s string, args map[string]string) string {
	for k, v := range args {
		s = strings.ReplaceAll(s, "${"+k+"}", v)
		s = strings.ReplaceAll(s, "$"+k, v)
	}
	return s
}

// File is a file, directory or symlink of a layer.
type File struct {
	Path     string // absolute path in the image
	Mode     int64  // permission bits (and 01000 sticky)
	UID, GID int
	Dir      bool
	Link     string // symlink target
	Data     []byte
	HostPath string // read the contents from here instead of Data
}

// glibcFiles are the libc6 files the workerd binary loads (ldd), at the paths its
// program interpreter and the loader's default search path look.
var glibcFiles = []string{
	"/lib64/ld-linux-x86-64.so.2",
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/lib/x86_64-linux-gnu/libm.so.6",
	"/lib/x86_64-linux-gnu/libdl.so.2",
	"/lib/x86_64-linux-gnu/librt.so.1",
	"/lib/x86_64-linux-gnu/libpthread.so.0",
}

// BaseFiles returns the files standing in for a distroless base image.
func BaseFiles(base string) ([]File, []string, error) {
	name, _, _ := strings.Cut(base, "@")
	repo, tag, _ := strings.Cut(name, ":")
	if tag != "" && tag != "nonroot" && tag != "latest" {
		return nil, nil, fmt.Errorf("base %s: only the latest and nonroot tags are reproduced", base)
	}
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	}
	files := []File{
		{Path: "/etc", Dir: true, Mode: 0o755},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n")},
		{Path: "/etc/ssl", Dir: true, Mode: 0o755},
		{Path: "/etc/ssl/certs", Dir: true, Mode: 0o755},
		{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, HostPath: "/etc/ssl/certs/ca-certificates.crt"},
		{Path: "/home", Dir: true, Mode: 0o755},
		{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: 65532, GID: 65532},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/usr", Dir: true, Mode: 0o755},
		{Path: "/usr/local", Dir: true, Mode: 0o755},
		{Path: "/usr/local/bin", Dir: true, Mode: 0o755},
		{Path: "/var", Dir: true, Mode: 0o755},
	}
	switch repo {
	case "gcr.io/distroless/static-debian12":
	case "gcr.io/distroless/cc-debian12":
		files = append(files,
			File{Path: "/lib", Dir: true, Mode: 0o755},
			File{Path: "/lib/x86_64-linux-gnu", Dir: true, Mode: 0o755},
			File{Path: "/lib64", Dir: true, Mode: 0o755},
		)
		for _, f := range glibcFiles {
			host, err := filepath.EvalSymlinks(f)
			if err != nil {
				return nil, nil, fmt.Errorf("base %s needs glibc from this machine (Debian libc6): %w", base, err)
			}
			files = append(files, File{Path: f, Mode: 0o755, HostPath: host})
		}
	default:
		return nil, nil, fmt.Errorf("base %s is not reproduced (known: gcr.io/distroless/static-debian12, gcr.io/distroless/cc-debian12)", base)
	}
	return files, env, nil
}

// Image is what Build writes.
type Image struct {
	Ref        string // e.g. ghcr.io/workerd-operator/workerd:1.20261117.1
	Layers     [][]File
	Env        []string
	User       string
	Entrypoint []string
	WorkingDir string
}

// FromStage assembles an image from a Dockerfile's final stage: the base's files in one
// layer, then one layer per COPY, whose source is sources[dest] on this machine.
func FromStage(ref string, st *Stage, sources map[string]string) (*Image, error) {
	base, env, err := BaseFiles(st.Base)
	if err != nil {
		return nil, err
	}
	img := &Image{Ref: ref, Layers: [][]File{base}, Env: env, User: st.User, Entrypoint: st.Entrypoint}
	if strings.HasSuffix(st.Base, ":nonroot") {
		img.WorkingDir = "/home/nonroot"
	}
	used := map[string]bool{}
	for _, c := range st.Copies {
		src, ok := sources[c.Dest]
		if strings.Contains(c.Src, " ") || strings.HasSuffix(c.Dest, "/") {
			return nil, fmt.Errorf("COPY %s %s: only a single file to a file path is reproduced", c.Src, c.Dest)
		}
		if !ok {
			return nil, fmt.Errorf("COPY %s %s: no local file given for %s", c.Src, c.Dest, c.Dest)
		}
		used[c.Dest] = true
		var layer []File
		for d := path.Dir(c.Dest); d != "/"; d = path.Dir(d) {
			layer = append([]File{{Path: d, Dir: true, Mode: 0o755}}, layer...)
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		layer = append(layer, File{Path: c.Dest, Mode: int64(st.Mode().Perm()) | 0o555, HostPath: src})
		img.Layers = append(img.Layers, layer)
	}
	for d := range sources {
		if !used[d] {
			return nil, fmt.Errorf("%s is not a COPY destination of the Dockerfile's final stage", d)
		}
	}
	return img, nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// ConfigFile is the OCI image configuration Build writes (the fields it sets).
type ConfigFile struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string   `json:"User,omitempty"`
		Env        []string `json:"Env,omitempty"`
		Entrypoint []string `json:"Entrypoint,omitempty"`
		WorkingDir string   `json:"WorkingDir,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// WriteArchive writes the image as an OCI image layout in a tar file (uncompressed
// layers, reproducible: fixed timestamps and ordering). `ctr images import` names the
// image after the io.containerd.image.name annotation.
func (img *Image) WriteArchive(file string) error {
	blobs := map[string][]byte{}
	put := func(b []byte) string {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d] = b
		return d
	}
	var cfg ConfigFile
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.User, cfg.Config.Env, cfg.Config.Entrypoint, cfg.Config.WorkingDir = img.User, img.Env, img.Entrypoint, img.WorkingDir
	cfg.RootFS.Type = "layers"
	var layers []descriptor
	for _, l := range img.Layers {
		b, err := layerTar(l)
		if err != nil {
			return err
		}
		d := put(b)
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, d)
		layers = append(layers, descriptor{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: d, Size: int64(len(b))})
	}
	cb, _ := json.Marshal(cfg)
	cd := put(cb)
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: cd, Size: int64(len(cb))},
		"layers":        layers,
	}
	mb, _ := json.Marshal(manifest)
	md := put(mb)
	_, tag, _ := strings.Cut(img.Ref[strings.LastIndex(img.Ref, "/")+1:], ":")
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: md, Size: int64(len(mb)),
			Annotations: map[string]string{"io.containerd.image.name": img.Ref, "org.opencontainers.image.ref.name": tag},
			Platform:    &platform{Architecture: "amd64", OS: "linux"},
		}},
	}
	ib, _ := json.Marshal(index)
	return writeLayoutTar(file, ib, blobs)
}

// writeLayoutTar writes an OCI image layout (oci-layout, index.json, blobs sorted by
// digest) to file through a temporary file, so a failed write leaves no partial archive.
func writeLayoutTar(file string, ib []byte, blobs map[string][]byte) error {
	tmp := file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	err = add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	if err == nil {
		err = add("index.json", ib)
	}
	names := make([]string, 0, len(blobs))
	for d := range blobs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		if err == nil {
			err = add("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), blobs[d])
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

func layerTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Uid: f.UID, Gid: f.GID, Format: tar.FormatPAX}
		switch {
		case f.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
		default:
			h.Typeflag = tar.TypeReg
			data := f.Data
			if f.HostPath != "" {
				var err error
				if data, err = os.ReadFile(f.HostPath); err != nil {
					return nil, err
				}
			}
			h.Size = int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			if _, err := io.Copy(tw, bytes.NewReader(data)); err != nil {
				return nil, err
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
