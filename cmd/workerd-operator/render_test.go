package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestRenderCommand builds the binary and runs `render` as users do: printing matches
// the renderer's golden files, and --check reports workerd's own startup error with a
// non-zero exit.
func TestRenderCommand(t *testing.T) {
	bin := buildCommand(t)
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
			stdout, stderr, code := runCommand(t, bin, c.args...)
			if code != c.wantCode {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", code, c.wantCode, stderr)
			}
			if c.wantStdout != "" && stdout != c.wantStdout {
				t.Errorf("stdout differs from golden:\n%s", stdout)
			}
			for _, s := range c.wantStderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildCommand builds the binary once per test run.
func buildCommand(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "workerd-operator-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "workerd-operator")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// runCommand runs bin with args and returns its stdout, stderr and exit status.
func runCommand(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestRenderSamples: `render --check` passes on every sample, each file on its own
// (a Worker with its DurableObjectNamespace, Workflow or CronSchedule), and checks
// the shard and engine pods as well as the Worker's.
func TestRenderSamples(t *testing.T) {
	bin, workerd := buildCommand(t), testenv.WorkerdBinary(t)
	samples, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "fleet_*.yaml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	want := map[string][]string{
		"fleet_v1alpha1_chat.yaml":   {"check default/chat: ok", "check default/rooms-do: ok"},
		"fleet_v1alpha1_orders.yaml": {"check default/shop: ok", "check default/orders-wf: ok"},
	}
	for _, f := range samples {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, stderr, code := runCommand(t, bin, "render", "--check", "--workerd", workerd, "-f", f)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			for _, s := range want[filepath.Base(f)] {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}
