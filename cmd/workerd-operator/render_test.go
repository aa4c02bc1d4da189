package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestRenderCommand builds the binary and runs `render` as users do: printing matches
// the renderer's golden files, and --check reports workerd's own startup error with a
// non-zero exit.
func TestRenderCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "workerd-operator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	workerd := testenv.WorkerdBinary(t)
	td := filepath.Join("..", "..", "internal", "render", "testdata")
	golden := func(name string) string {
		b, err := os.ReadFile(filepath.Join(td, name+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{
			name:       "print matches golden",
			args:       []string{"render", "-f", filepath.Join(td, "01-text-json-bindings.yaml")},
			wantStdout: golden("01-text-json-bindings"),
		},
		{
			name:       "service bindings across files print in-cluster names",
			args:       []string{"render", "-f", filepath.Join(td, "09-service-binding.yaml")},
			wantStdout: golden("09-service-binding"),
		},
		{
			name:       "check syntax error",
			args:       []string{"render", "--check", "--workerd", workerd, "-f", filepath.Join(td, "19-syntax-error.yaml")},
			wantCode:   2,
			wantStderr: []string{"check default/hello: FAILED", "service hello: Uncaught SyntaxError: ", "at worker.js:"},
		},
		{
			name:       "check ok with a service binding and a secret",
			args:       []string{"render", "--check", "--workerd", workerd, "-f", filepath.Join(td, "09-service-binding.yaml"), "-f", filepath.Join(td, "02-secret.yaml")},
			wantStderr: []string{"check apps/caller: ok", "check apps/greeter: ok", "check apps/secretive: ok"},
		},
		{
			name:       "render error names the field",
			args:       []string{"render", "-f", filepath.Join(td, "16-invalid-json-binding.yaml")},
			wantCode:   1,
			wantStderr: []string{"spec.bindings[1].json: invalid JSON"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.wantCode {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", code, c.wantCode, stderr.String())
			}
			if c.wantStdout != "" && stdout.String() != c.wantStdout {
				t.Errorf("stdout differs from golden:\n%s", stdout.String())
			}
			for _, s := range c.wantStderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
		})
	}
}
