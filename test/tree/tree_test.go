package tree_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// root returns the repository root.
func root(t *testing.T) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sourceFile is a parsed non-test, non-generated Go file of the repository.
type sourceFile struct {
	rel  string // slash-separated path from the repository root
	fset *token.FileSet
	file *ast.File
	src  []byte
}

// skipDir are directories that hold no source of the product: VCS data, build output
// and test fixtures.
func skipDir(name string) bool {
	switch name {
	case ".git", "bin", "dist", "testdata", "node_modules", "vendor":
		return true
	}
	return false
}

// sourceFiles parses every .go file of the repository that is neither a test
// (*_test.go) nor generated ("// Code generated ... DO NOT EDIT."), whatever its build
// tags.
func sourceFiles(t *testing.T) []sourceFile {
	t.Helper()
	r := root(t)
	var out []sourceFile
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != r && (skipDir(d.Name()) || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, _ := filepath.Rel(r, p)
		out = append(out, sourceFile{rel: filepath.ToSlash(rel), fset: fset, file: f, src: src})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no Go files found")
	}
	return out
}

// TestBinaryDeps: the production binary (./cmd/workerd-operator without the dev build
// tag, as `make build` and the Dockerfile build it) links no test code and none of the
// local dev cluster's dependencies.
func TestBinaryDeps(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/workerd-operator")
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/workerd-operator: %v\n%s", err, stderr.String())
	}
	forbidden := []struct {
		match func(pkg string) bool
		why   string
	}{
		{func(p string) bool { return p == "testing" || strings.HasPrefix(p, "testing/") }, "test code (package testing)"},
		{func(p string) bool { return strings.Contains(p, "virtual-kubelet") }, "the dev cluster's virtual kubelet"},
		{func(p string) bool { return strings.Contains(p, "sig-storage-lib-external-provisioner") }, "the dev cluster's volume provisioner"},
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	n := 0
	for sc.Scan() {
		pkg := strings.TrimSpace(sc.Text())
		n++
		for _, f := range forbidden {
			if f.match(pkg) {
				t.Errorf("the production binary links %s: %s (find the importer with: go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/workerd-operator | grep %s)", f.why, pkg, pkg)
			}
		}
	}
	if n == 0 {
		t.Fatal("go list -deps printed nothing")
	}
}

// Function length ceilings (lines from `func` to the closing brace).
const (
	maxFuncLines   = 80
	maxRenderLines = 60 // render.Render orchestrates; the work is in the functions it calls
)

// TestFunctionLength: no non-test, non-generated function is longer than maxFuncLines,
// and render.Render is under maxRenderLines. A function literal at package level (var x
// = func...) counts as a function of its own; one inside a function counts toward that
// function.
func TestFunctionLength(t *testing.T) {
	type long struct {
		where string
		lines int
	}
	var over []long
	renderFound := false
	for _, sf := range sourceFiles(t) {
		lines := func(n ast.Node) int {
			return sf.fset.Position(n.End()).Line - sf.fset.Position(n.Pos()).Line + 1
		}
		for _, decl := range sf.file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					name = recvName(d.Recv.List[0].Type) + "." + name
				}
				n := lines(d)
				where := fmt.Sprintf("%s:%d %s", sf.rel, sf.fset.Position(d.Pos()).Line, name)
				if sf.file.Name.Name == "render" && path0(sf.rel) == "internal/render" && d.Recv == nil && d.Name.Name == "Render" {
					renderFound = true
					if n >= maxRenderLines {
						t.Errorf("%s is %d lines, want under %d (an orchestrator: move the work into functions it calls)", where, n, maxRenderLines)
					}
				}
				if n > maxFuncLines {
					over = append(over, long{where, n})
				}
			case *ast.GenDecl:
				ast.Inspect(d, func(n ast.Node) bool {
					fl, ok := n.(*ast.FuncLit)
					if !ok {
						return true
					}
					if l := lines(fl); l > maxFuncLines {
						over = append(over, long{fmt.Sprintf("%s:%d func literal", sf.rel, sf.fset.Position(fl.Pos()).Line), l})
					}
					return false
				})
			}
		}
	}
	sort.Slice(over, func(i, j int) bool { return over[i].lines > over[j].lines })
	for _, o := range over {
		t.Errorf("%s is %d lines, want at most %d", o.where, o.lines, maxFuncLines)
	}
	if !renderFound {
		t.Errorf("func Render not found in internal/render")
	}
}

// path0 is the directory of a slash-separated relative path.
func path0(rel string) string {
	if i := strings.LastIndex(rel, "/"); i >= 0 {
		return rel[:i]
	}
	return ""
}

// recvName is the type name of a method receiver: T for T, *T, T[P] and *T[P].
func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// historyPatterns find pointers to the project's own history and to files outside the
// repository, which no user has: seed files and their numbers, issue numbers
// ("issue 6", "issue 8 done 3"), the ../shared directory and the design and reference
// notes kept there. Ordinary words stay allowed: "issues a certificate", "issuer",
// "a random seed".
var historyPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bseeds?\s*[` + "`" + `'"(]?\s*0\d\d\b`), // seed 001, seed `001`, seeds 000
	regexp.MustCompile(`(?i)\bseed\s+\d`),                            // seed 3
	regexp.MustCompile(`(?i)\bthe seed('s)?\b`),                      // the seed's values
	regexp.MustCompile(`(?i)\bseed (file|text|host|value)s?\b`),      // seed files
	regexp.MustCompile(`(?i)\bshared/seeds\b`),
	regexp.MustCompile(`\b\d{3}_[0-9a-f]{16}\.txt\b`), // 000_6729543119e24b55.txt
	regexp.MustCompile(`(?i)\bissues?\s+#?\d+`),       // issue 6, issues 3 and 4
	regexp.MustCompile(`(?i)\bdone means\s+\d`),       // "Done means 5" of an issue
	regexp.MustCompile(`\.\./shared\b`),
	regexp.MustCompile(`\bDESIGN(\.md)?\s*§`), // DESIGN.md §6, DESIGN §6
	regexp.MustCompile(`\bDESIGN\.md\b`),
	regexp.MustCompile(`\b(cloudflare-semantics|workerd-facts|real-node-facts)(\.md)?\b`),
}

// historyAllowed are the only places a history pattern may appear, each with its reason.
var historyAllowed = map[string]string{
	// The test harness locates the reference texts a few tests compare the product's
	// numbers against (testenv.SharedDir). Only tests import it; TestBinaryDeps keeps
	// it out of the binary, and nothing a user sees refers to it.
	"internal/testenv/testenv.go": "test harness: locates the reference texts tests read",
}

// TestNoProjectHistory: non-test Go files (comments and strings), the JavaScript shims
// injected into every pod, the generated CRDs (what `kubectl explain` prints) and the
// docs a user reads (README.md, docs/*.md) carry no history pointers (historyPatterns).
func TestNoProjectHistory(t *testing.T) {
	r := root(t)
	type text struct {
		rel string
		src []byte
	}
	var texts []text
	for _, sf := range sourceFiles(t) {
		texts = append(texts, text{sf.rel, sf.src})
	}
	for _, glob := range []string{
		"internal/shim/*.js",
		"config/crd/bases/*.yaml",
		"charts/workerd-operator/files/crds/*.yaml",
		"docs/*.md",
		"README.md",
	} {
		ms, err := filepath.Glob(filepath.Join(r, filepath.FromSlash(glob)))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Errorf("%s matches no file", glob)
		}
		for _, m := range ms {
			b, err := os.ReadFile(m)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(r, m)
			texts = append(texts, text{filepath.ToSlash(rel), b})
		}
	}
	byPkg := map[string]int{}
	for _, tx := range texts {
		if _, ok := historyAllowed[tx.rel]; ok {
			continue
		}
		for i, line := range strings.Split(string(tx.src), "\n") {
			for _, re := range historyPatterns {
				if m := re.FindString(line); m != "" {
					t.Errorf("%s:%d: %q: %s", tx.rel, i+1, m, strings.TrimSpace(line))
					byPkg[path0(tx.rel)]++
					break
				}
			}
		}
	}
	if len(byPkg) > 0 {
		dirs := make([]string, 0, len(byPkg))
		for d := range byPkg {
			dirs = append(dirs, fmt.Sprintf("%s (%d)", d, byPkg[d]))
		}
		sort.Strings(dirs)
		t.Logf("offending lines per directory: %s", strings.Join(dirs, ", "))
	}
}

// topLevel are the folders the project's layout names at the repository root, the
// kubebuilder layout with reconcilers in controllers/ (one package per kind).
var topLevel = []string{"api", "controllers", "config", "internal", "hack", "charts", "test", "cmd", "docs"}

// TestLayout: every folder of the layout is at the root, the reconcilers are in
// controllers/ and nowhere under internal/, and the production binary links them.
func TestLayout(t *testing.T) {
	r := root(t)
	for _, d := range topLevel {
		if fi, err := os.Stat(filepath.Join(r, d)); err != nil || !fi.IsDir() {
			t.Errorf("the repository root has no %s/ folder", d)
		}
	}
	for _, f := range []string{"go.mod", "go.sum", "Dockerfile", "PROJECT"} {
		if _, err := os.Stat(filepath.Join(r, f)); err != nil {
			t.Errorf("the repository root has no %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(r, "internal", "controller")); err == nil {
		t.Errorf("internal/controller exists: reconcilers live in controllers/")
	}
	for _, kind := range []string{"worker", "durableobjectnamespace", "workflow", "datastore", "r2bucket", "cronschedule", "common"} {
		if _, err := os.Stat(filepath.Join(r, "controllers", kind)); err != nil {
			t.Errorf("controllers/%s is missing", kind)
		}
	}
	cmd := exec.Command("go", "list", "-deps", "./cmd/workerd-operator")
	cmd.Dir = r
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/workerd-operator: %v", err)
	}
	if !bytes.Contains(out, []byte("/controllers/worker\n")) {
		t.Errorf("the production binary does not link controllers/worker")
	}
}
