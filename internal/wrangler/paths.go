package wrangler

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A project's files are published (into YAML or an image), so every path import reads
// resolves under the project's directory: no absolute or ".." path out of it, and no
// symbolic link leading out of it (os.Root). A refusal names the file.

// within reports whether dir is parent or lies under it, lexically.
func within(dir, parent string) bool {
	rel, err := filepath.Rel(parent, dir)
	return err == nil && !filepath.IsAbs(rel) && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// underProject returns p (absolute, or relative to base) as a path relative to the
// project directory root, refusing one outside it.
func underProject(root, base, p, what string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	if !within(p, root) {
		return "", fmt.Errorf("%s %s is outside the project %s: import publishes only the project's own files", what, p, root)
	}
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// readDirUnder lists directory rel of root and reads each regular entry that keep
// accepts, following symbolic links only inside root. It returns nil, nil when the
// directory does not exist.
func readDirUnder(root, rel string, keep func(name string) bool) (map[string][]byte, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	entries, err := fs.ReadDir(r.FS(), rel)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, refusedPath(root, rel, err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !keep(e.Name()) {
			continue
		}
		name := rel + "/" + e.Name()
		b, err := r.ReadFile(name)
		if err != nil {
			return nil, refusedPath(root, name, err)
		}
		out[e.Name()] = b
	}
	return out, nil
}

// readUnder reads file rel of root, following symbolic links only inside root.
func readUnder(root, rel string) ([]byte, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := r.ReadFile(rel)
	if err != nil {
		return nil, refusedPath(root, rel, err)
	}
	return b, nil
}

func refusedPath(root, rel string, err error) error {
	return fmt.Errorf("%s: refused: %w (a symbolic link leading out of %s is never followed: import publishes only the project's own files)",
		filepath.Join(root, rel), err, root)
}
