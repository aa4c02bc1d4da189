package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/workflows"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// The workflows subcommand against a real sidecar engine (no runner: instances stay
// queued, which is all list/status/terminate/delete need).
func TestWorkflowsCommand(t *testing.T) {
	srv, err := sidecar.New(sidecar.Options{Addr: testenv.FreeLoopbackAddr(t), DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := workflows.Attach(srv, workflows.Options{RunnerURL: "http://" + testenv.FreeLoopbackAddr(t), Workflows: []api.WorkflowConfig{{Name: "orders", Concurrency: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close(); _ = e.Close() })
	for _, id := range []string{"a1", "a2", "a3"} {
		if _, err := e.Create("orders", api.CreateOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (string, error) {
		c := newWorkflowsCommand()
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetErr(&out)
		c.SetArgs(append([]string{"--sidecar", "http://" + srv.Addr(), "--workflow", "orders"}, args...))
		err := c.Execute()
		return out.String(), err
	}
	cases := []struct {
		args    []string
		want    []string
		wantErr string
	}{
		{[]string{"list", "--limit", "2"}, []string{"a1", "a2", "more: --cursor a2"}, ""},
		{[]string{"list", "--all", "--limit", "2"}, []string{"a1", "a2", "a3"}, ""},
		{[]string{"terminate", "a3"}, []string{"a3: terminated"}, ""},
		{[]string{"list", "--status", "terminated"}, []string{"a3\tterminated"}, ""},
		{[]string{"terminate", "a3"}, []string{"finite state"}, "failed for 1 of 1"},
		{[]string{"status", "a3"}, []string{`"status": "terminated"`}, ""},
		{[]string{"delete", "a3"}, []string{"a3: deleted"}, ""},
		{[]string{"status", "a3"}, nil, "instance.not_found"},
	}
	for _, tc := range cases {
		out, err := run(tc.args...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
		} else if err != nil {
			t.Errorf("%v: %v\n%s", tc.args, err, out)
		}
		flat := strings.Join(strings.Fields(out), " ")
		for _, w := range tc.want {
			if !strings.Contains(out, w) && !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
}
