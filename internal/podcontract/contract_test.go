package podcontract_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// contractPorts are the pod's fixed ports (9090–9095).
var contractPorts = map[int64]string{
	podcontract.HealthPort:  "HealthPort",
	podcontract.TriggerPort: "TriggerPort",
	podcontract.SidecarPort: "SidecarPort",
	podcontract.GatewayPort: "GatewayPort",
	podcontract.RunnerPort:  "RunnerPort",
	podcontract.RPCPort:     "RPCPort",
}

// names are the pod contract's string constants. The socket and container names are
// scanned for (a literal equal to one is a stray); the others share their spellings and
// are named in the hint.
var names = []struct {
	value, name string
	scanned     bool
}{
	{podcontract.HTTPSocket, "HTTPSocket", true},
	{podcontract.RPCSocket, "RPCSocket", true},
	{podcontract.HealthSocket, "HealthSocket", true},
	{podcontract.TriggerSocket, "TriggerSocket", true},
	{podcontract.GatewaySocket, "GatewaySocket", true},
	{podcontract.WorkflowSocket, "WorkflowSocket", true},
	{podcontract.WorkerdContainer, "WorkerdContainer", true},
	{podcontract.SidecarContainer, "SidecarContainer", true},
	{podcontract.ImageCheckContainer, "ImageCheckContainer", true},
	{podcontract.ImageCheckCommand, "ImageCheckCommand", true},
	{podcontract.HTTPPortName, "HTTPPortName", false},
	{podcontract.RPCPortName, "RPCPortName", false},
	{podcontract.HealthPortName, "HealthPortName", false},
	{podcontract.TriggerPortName, "TriggerPortName", false},
	{podcontract.SidecarPortName, "SidecarPortName", false},
	{podcontract.GatewayPortName, "GatewayPortName", false},
	{podcontract.SidecarService, "SidecarService", false},
	{podcontract.SidecarCommand, "SidecarCommand", false},
	{podcontract.HTTPAppProtocol, "HTTPAppProtocol", false},
}

// contractNames maps each scanned spelling to the constants spelled that way.
var contractNames = func() map[string][]string {
	m := map[string][]string{}
	for _, n := range names {
		if n.scanned {
			m[n.value] = nil
		}
	}
	for _, n := range names {
		if _, ok := m[n.value]; ok {
			m[n.value] = append(m[n.value], "podcontract."+n.name)
		}
	}
	return m
}()

// strayAllowed lists literals outside this package that equal a contract name but mean
// something else, as "file: literal" with what they mean.
var strayAllowed = map[string]string{
	// Command-line vocabulary of the binary, not names in a pod.
	`cmd/workerd-operator/render.go: "workerd"`:      "the --workerd flag of `render` (a workerd binary)",
	`cmd/workerd-operator/workflows.go: "workflows"`: "the `workflows` subcommand",
	`cmd/workerd-operator/workflows.go: "sidecar"`:   "the --sidecar flag of `workflows` (the sidecar's URL)",
	// Values of other vocabularies that happen to be spelled like a contract name.
	`internal/limits/limits.go: "sidecar"`:          "limits.Sidecar, the Enforcement value docs/limits.md prints",
	`internal/toolchain/toolchain.go: "workerd"`:    "the npm package's cache directory and binary name",
	`internal/webhook/compatflags_pinned.go: "rpc"`: "workerd's `rpc` compatibility flag",
	`api/v1alpha1/backup_funcs.go: "workflows"`:     "the Workflow kind's resource name in a default backup path",
	`internal/backup/restore.go: "http"`:            "the URL scheme of an S3 endpoint",
	`internal/specs/backup.go: "http"`:              "the URL scheme of an S3 endpoint",
	`internal/render/bindings.go: "http"`:           "the Cap'n Proto field `http` of an external service (its protocol)",
	`internal/wrangler/config.go: "workflows"`:      "the wrangler config key `workflows`",
	`internal/wrangler/convert.go: "workflows"`:     "the wrangler config key `workflows`",
}

// TestNoStrayLiterals: the pod contract's ports (9090–9095), socket names and container
// names are written as literals only in this package. Every other non-test,
// non-generated Go file of the repository (any build tag) refers to the constants, so
// changing one changes the operator, the renderer, the sidecar and the dispatcher
// together.
func TestNoStrayLiterals(t *testing.T) {
	root, err := toolchain.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for p, name := range contractPorts {
		if p < 9090 || p > 9095 {
			t.Errorf("%s = %d, outside 9090–9095: update this test's range and docs/pod-contract.md", name, p)
		}
	}
	var stray []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case p == root:
			case strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "bin", d.Name() == "dist", d.Name() == "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "internal/podcontract/") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok {
				return true
			}
			var what string
			switch lit.Kind {
			case token.INT:
				if v, err := strconv.ParseInt(strings.ReplaceAll(lit.Value, "_", ""), 0, 64); err == nil {
					if name, ok := contractPorts[v]; ok {
						what = "podcontract." + name
					}
				}
			case token.STRING:
				if s, err := strconv.Unquote(lit.Value); err == nil {
					if names, ok := contractNames[s]; ok {
						what = "whichever of " + strings.Join(names, ", ") + " it means"
					}
				}
			}
			if what == "" {
				return true
			}
			key := rel + ": " + lit.Value
			if _, ok := strayAllowed[key]; ok {
				return true
			}
			stray = append(stray, fmt.Sprintf("%s:%d: %s (use %s)", rel, fset.Position(lit.Pos()).Line, lit.Value, what))
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(stray)
	for _, s := range stray {
		t.Error(s)
	}
}
