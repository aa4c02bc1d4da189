package ociimage

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDockerfilesReproduced: the final stages of the project's Dockerfiles use only what
// this package reproduces, with the user and entrypoint the pod contract expects; an
// image assembled from a stage carries them.
func TestDockerfilesReproduced(t *testing.T) {
	for _, c := range []struct {
		file, dest string
		entry      []string
	}{
		{"Dockerfile", "/workerd-operator", []string{"/workerd-operator"}},
		{"Dockerfile.workerd", "/usr/local/bin/workerd", []string{"/usr/local/bin/workerd"}},
	} {
		st, err := ParseDockerfile(filepath.Join("..", "..", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if st.User != "65532:65532" || !reflect.DeepEqual(st.Entrypoint, c.entry) || len(st.Copies) != 1 || st.Copies[0].Dest != c.dest {
			t.Errorf("%s: final stage %+v", c.file, st)
		}
		bin := filepath.Join(t.TempDir(), "bin")
		if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		img, err := FromStage("example.org/x:1", st, map[string]string{c.dest: bin})
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		archive := filepath.Join(t.TempDir(), "x.tar")
		if err := img.WriteArchive(archive); err != nil {
			t.Fatal(err)
		}
		cfg := readConfig(t, archive)
		if cfg.Config.User != st.User || !reflect.DeepEqual(cfg.Config.Entrypoint, st.Entrypoint) || len(cfg.RootFS.DiffIDs) != 2 {
			t.Errorf("%s: image config %+v", c.file, cfg)
		}
	}
}

func TestRejectsWhatItCannotReproduce(t *testing.T) {
	dir := t.TempDir()
	for name, df := range map[string]string{
		"run in final stage": "FROM gcr.io/distroless/static-debian12:nonroot\nRUN true\n",
		"unknown base":       "FROM debian:12\nCOPY a /a\n",
	} {
		f := filepath.Join(dir, "Dockerfile")
		os.WriteFile(f, []byte(df), 0o644)
		st, err := ParseDockerfile(f)
		if err == nil {
			_, err = FromStage("x/y:z", st, map[string]string{"/a": f})
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func readConfig(t *testing.T, archive string) ConfigFile {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	blobs := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		blobs[h.Name] = b
	}
	var index struct{ Manifests []descriptor }
	json.Unmarshal(blobs["index.json"], &index)
	var m struct{ Config descriptor }
	json.Unmarshal(blobs["blobs/sha256/"+strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")], &m)
	var cfg ConfigFile
	if err := json.Unmarshal(blobs["blobs/sha256/"+strings.TrimPrefix(m.Config.Digest, "sha256:")], &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}
