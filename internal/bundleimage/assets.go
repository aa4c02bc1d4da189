package bundleimage

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// alwaysIgnored are the files wrangler never uploads as assets: the ignore file itself
// and the two files it reads as configuration instead (spec.assets.headers and
// redirects), at the top of the directory only (workers-shared's
// createAssetsIgnoreFunction anchors them; a nested _headers is an asset). .assetsignore
// takes gitignore's format: https://developers.cloudflare.com/workers/static-assets/binding/
var alwaysIgnored = []string{"/.assetsignore", "/_headers", "/_redirects"}

// assetTree reads the asset directory dir into a tree under AssetsPath, without the
// files .assetsignore (gitignore-style patterns, as wrangler reads it) and
// alwaysIgnored name; it returns the number of files.
func assetTree(dir string) (*tree, int, error) {
	ignore, err := readIgnore(filepath.Join(dir, ".assetsignore"))
	if err != nil {
		return nil, 0, err
	}
	_, statErr := os.Stat(filepath.Join(dir, ".assetsignore"))
	hasIgnoreFile := statErr == nil
	ignore = append(ignore, alwaysIgnored...)
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("assets directory %s: %w", dir, err)
	}
	t := newTree()
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignored(ignore, rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !hasIgnoreFile && strings.HasPrefix(rel, pagesWorker) {
			return pagesWorkerError(rel)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if err := linkInside(root, p, rel); err != nil {
				return err
			}
		}
		data, err := os.ReadFile(p) // follows a symbolic link, as an upload would
		if err != nil {
			return err
		}
		t.add(path.Join(AssetsPath, rel), data)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("assets directory %s: %w", dir, err)
	}
	return t, len(t.files), nil
}

// pagesWorker is the name of a Pages project's server code. Wrangler refuses to upload
// it (a file, or anything under a directory of that name: it tests the path's prefix)
// as an asset when the directory has no .assetsignore, since that would publish the
// server's code (workers-sdk packages/wrangler/src/assets.ts,
// errorOnLegacyPagesWorkerJSAsset); so does import.
const pagesWorker = "_worker.js"

func pagesWorkerError(rel string) error {
	return fmt.Errorf("%s: uploading a Pages %s as an asset would publish the server's code to anyone; wrangler refuses it too. "+
		"Remove it, or list %s in an .assetsignore file at the top of the directory (an empty .assetsignore publishes it) "+
		"(https://developers.cloudflare.com/workers/static-assets/binding/#ignoring-assets)", rel, pagesWorker, pagesWorker)
}

// linkInside refuses the symbolic link p (rel in the asset directory, whose real path
// is root) unless the file it names is inside the directory: the image holds the
// file's bytes, and a file from elsewhere on the machine (a key, a credentials file)
// must not be published with the assets.
func linkInside(root, p, rel string) error {
	target, _ := os.Readlink(p)
	to, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("%s is a symbolic link to %q, which does not resolve: %w", rel, target, err)
	}
	if r, err := filepath.Rel(root, to); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s is a symbolic link to %q, outside the assets directory: import --image packs the file a link names "+
			"and does not take files from elsewhere on this machine; copy the file in or remove the link", rel, target)
	}
	if st, err := os.Stat(to); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a symbolic link to the directory %q: import --image packs files only; copy the directory in", rel, target)
	}
	return nil
}

// readIgnore reads the patterns of an .assetsignore file (none if it does not exist).
func readIgnore(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pats []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			return nil, fmt.Errorf("%s: negated pattern %q is not supported", file, line)
		}
		pats = append(pats, line)
	}
	return pats, sc.Err()
}

// ignored reports whether rel (slash-separated, relative to the asset directory)
// matches one of pats as gitignore reads them
// (https://git-scm.com/docs/gitignore#_pattern_format): a pattern without a slash
// matches a name at any depth, one with a slash (or a leading one) matches from the
// top, a trailing slash matches directories only, and "**" spans directories ("**/x"
// in every directory, "d/**" everything under d).
func ignored(pats []string, rel string, dir bool) bool {
	for _, p := range pats {
		dirOnly := strings.HasSuffix(p, "/")
		p = strings.TrimSuffix(p, "/")
		if dirOnly && !dir {
			continue
		}
		if strings.Contains(p, "/") {
			p = strings.TrimPrefix(p, "/")
		} else {
			p = "**/" + p
		}
		if ok, _ := doublestar.Match(p, rel); ok {
			return true
		}
	}
	return false
}
