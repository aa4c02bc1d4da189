package cron

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestCronNextCommand runs `workerd-operator cron next` (built into a temporary
// directory) on every case of the shared Cloudflare testdata and checks it gives the
// same answers as the parser test: validity, fires and the listed next times, with a
// non-zero exit status exactly for invalid expressions.
func TestCronNextCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "workerd-operator")
	build := exec.Command("go", "build", "-o", bin, "./cmd/workerd-operator")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, c := range loadDialectCases(t) {
		t.Run(c.Expr, func(t *testing.T) {
			cmd := exec.Command(bin, "cron", "next", "--after", c.After, "-n", strconv.Itoa(len(c.Next)), c.Expr)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			if c.Valid != (runErr == nil) {
				t.Fatalf("exit error %v for valid=%v (stderr %s)", runErr, c.Valid, stderr.String())
			}
			if strings.Count(strings.TrimSpace(stdout.String()), "\n") != 0 {
				t.Fatalf("stdout is not one JSON line: %q", stdout.String())
			}
			var got map[string]any
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("stdout %q: %v", stdout.String(), err)
			}
			if got["valid"] != c.Valid {
				t.Fatalf("valid = %v, want %v", got["valid"], c.Valid)
			}
			if !c.Valid {
				if _, ok := got["error"].(string); !ok || len(got) != 2 {
					t.Fatalf("invalid answer %v: want exactly valid and error", got)
				}
				return
			}
			if _, has := got["error"]; has || got["fires"] != *c.Fires {
				t.Fatalf("answer %v: want fires %v and no error", got, *c.Fires)
			}
			var next []string
			for _, v := range got["next"].([]any) {
				next = append(next, v.(string))
			}
			if strings.Join(next, " ") != strings.Join(c.Next, " ") {
				t.Fatalf("next = %v, want %v", next, c.Next)
			}
		})
	}
}
