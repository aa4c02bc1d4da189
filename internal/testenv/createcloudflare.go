package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// CreateCloudflare returns the directory of the project `npm create cloudflare` makes
// for the framework option (hack/create-cloudflare.sh, which pins create-cloudflare and
// caches the project, without node_modules, under the cache directory keyed by its
// version). flags are further C3 flags, e.g. --variant=react-ts. It needs npm's
// registry the first time; the caller builds the project with BuildProject.
func CreateCloudflare(framework string, flags ...string) (string, error) {
	root, err := toolchain.RepoRoot()
	if err != nil {
		return "", err
	}
	args := append([]string{filepath.Join(root, "hack", "create-cloudflare.sh"), framework}, flags...)
	cmd := exec.Command("bash", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("create-cloudflare --framework=%s: %w", framework, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// readFiles is the line wrangler's buildAssetManifest logs before listing, at debug
// level, every entry of the asset directory (fs.readdir recursive: files and
// directories), each as "/<path>"; it then logs "Ignoring asset: <path>" for each entry
// its .assetsignore rules drop (workers-sdk packages/wrangler/src/assets.ts).
var readFiles = regexp.MustCompile(`Read (\d+) files? from the assets directory (.+)$`)

// WranglerAssetUploads runs `wrangler deploy --dry-run` in the built project dir with
// WRANGLER_LOG=debug and returns the asset files wrangler would upload, as it lists
// them: every entry it read, less the ones it logged as ignored and the directories.
func WranglerAssetUploads(dir string) ([]string, error) {
	nodeBin, err := toolchain.NodeBin()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	cmd := exec.Command("npx", "wrangler", "deploy", "--dry-run", "--outdir", filepath.Join(os.TempDir(), "wrangler-dry-run-"+filepath.Base(dir)))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CI=1", "WRANGLER_SEND_METRICS=false", "NO_UPDATE_NOTIFIER=1", "WRANGLER_LOG=debug", "NO_COLOR=1", "FORCE_COLOR=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("wrangler deploy --dry-run: %v\n%s", err, out)
	}
	return parseAssetUploads(string(out))
}

// parseAssetUploads reads wrangler's debug log (see readFiles).
func parseAssetUploads(log string) ([]string, error) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var read []string
	var assetsDir string
	ignored := map[string]bool{}
	for n := -1; sc.Scan(); {
		line := strings.TrimRight(sc.Text(), "\r")
		switch m := readFiles.FindStringSubmatch(line); {
		case m != nil:
			n, _ = strconv.Atoi(m[1])
			assetsDir = strings.TrimSpace(m[2])
		case n > 0:
			read = append(read, strings.TrimPrefix(line, "/"))
			n--
		case strings.HasPrefix(line, "Ignoring asset: "):
			ignored[strings.TrimPrefix(line, "Ignoring asset: ")] = true
		}
	}
	if assetsDir == "" {
		return nil, fmt.Errorf("wrangler logged no asset directory listing (\"Read N files from the assets directory\"):\n%s", log)
	}
	var files []string
	for _, f := range read {
		if ignored[f] {
			continue
		}
		st, err := os.Stat(filepath.Join(assetsDir, f))
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			continue
		}
		files = append(files, filepath.ToSlash(f))
	}
	sort.Strings(files)
	return files, nil
}
