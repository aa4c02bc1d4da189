package workflows_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// startBuiltinEngine starts the pinned workerd with its own Workflows engine (`workerd
// serve wrangler.json --experimental`, its bundled workflows.js) on testdata/worker.js
// with defs bound as wrangler's `workflows` would bind them; the harness it returns
// calls the bindings (binding, call) only.
func startBuiltinEngine(t testing.TB, defs ...wfDef) (*harness, *exec.Cmd) {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/worker.js")
	if err != nil {
		t.Fatal(err)
	}
	var wfs []map[string]string
	for _, d := range defs {
		wfs = append(wfs, map[string]string{"name": d.cfg.Name, "binding": d.binding, "class_name": d.class})
	}
	cfg, _ := json.Marshal(map[string]any{"name": "builtin", "main": "worker.js", "compatibility_date": "2026-09-10", "no_bundle": true, "workflows": wfs})
	for name, data := range map[string][]byte{"worker.js": src, "wrangler.json": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := testenv.FreeLoopbackAddr(t)
	logs := &syncBuffer{}
	cmd := exec.Command(testenv.WorkerdBinary(t), "serve", "wrangler.json", "--experimental", "--socket-addr=http="+addr)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	h := &harness{t: t, logs: logs, client: newHarnessClient(), httpAddr: addr}
	h.waitUp("workerd (built-in engine)", p, "http://"+addr+"/")
	return h, cmd
}

// scenario drives one instance through the test Worker's bindings and returns what
// the Worker saw: the answers of the calls that fail, and status() at the end.
type scenario struct {
	name string
	run  func(h *harness) any
}

// TestMatchesBuiltInEngine: each scenario, through env.<BINDING> in the same Worker
// code, ends in the same answers on this engine as on the pinned workerd's own engine:
// status() (status, output, error) at the end, and the errors of refused calls. A
// difference is ours.
func TestMatchesBuiltInEngine(t *testing.T) {
	defs := []wfDef{
		{api.WorkflowConfig{Name: "basic"}, "Basic", "BASIC"},
		{api.WorkflowConfig{Name: "retry"}, "Retry", "RETRY"},
		{api.WorkflowConfig{Name: "events"}, "Events", "EVENTS"},
		{api.WorkflowConfig{Name: "short"}, "ShortWait", "SHORT"},
		{api.WorkflowConfig{Name: "delayfn"}, "DelayFn", "DELAYFN"},
		{api.WorkflowConfig{Name: "shapes"}, "Shapes", "SHAPES"},
	}
	ours := newHarness(t, 1, defs...)
	builtIn, _ := startBuiltinEngine(t, defs...)
	for _, sc := range builtInScenarios {
		t.Run(sc.name, func(t *testing.T) {
			o, b := sc.run(ours), sc.run(builtIn)
			if !reflect.DeepEqual(o, b) {
				ob, _ := json.Marshal(o)
				bb, _ := json.Marshal(b)
				t.Errorf("this engine:\n  %s\nworkerd's built-in engine:\n  %s", ob, bb)
			}
		})
	}
}

var builtInScenarios = []scenario{
	{"do, sleep, event sent early, do", func(h *harness) any {
		create(h, "BASIC", "b1", map[string]any{"n": 41})
		answer(h, "BASIC", "sendEvent", map[string]any{"id": "b1", "type": "approve", "payload": map[string]any{"add": 100, "by": "ops"}})
		return settled(h, "BASIC", "b1")
	}},
	{"NonRetryableError", func(h *harness) any {
		create(h, "RETRY", "r1", map[string]any{"mode": "nonretryable", "config": map[string]any{"retries": map[string]any{"limit": 3, "delay": 0}}})
		return settled(h, "RETRY", "r1")
	}},
	{"retries spent", func(h *harness) any {
		create(h, "RETRY", "r2", map[string]any{"mode": "fails", "config": map[string]any{"retries": map[string]any{"limit": 1, "delay": 0}}})
		return settled(h, "RETRY", "r2")
	}},
	{"a wait times out, the late event goes to the next wait", func(h *harness) any {
		create(h, "EVENTS", "e1", map[string]any{"earlyTimeout": "1 second"})
		time.Sleep(2500 * time.Millisecond)
		answer(h, "EVENTS", "sendEvent", map[string]any{"id": "e1", "type": "late", "payload": map[string]any{"x": 1}})
		return settled(h, "EVENTS", "e1")
	}},
	{"waitForEvent timeout", func(h *harness) any {
		create(h, "SHORT", "s1", nil)
		return settled(h, "SHORT", "s1")
	}},
	{"a throwing delay function", func(h *harness) any {
		create(h, "DELAYFN", "d1", map[string]any{"throwing": true})
		return settled(h, "DELAYFN", "d1")
	}},
	{"the errors run() sees", func(h *harness) any {
		out := map[string]any{}
		for _, c := range []string{"wait", "step", "emptyName", "unserialisable"} {
			create(h, "SHAPES", "shape-"+c, map[string]any{"case": c})
			out[c] = settled(h, "SHAPES", "shape-"+c)
		}
		return out
	}},
	{"refused calls", func(h *harness) any {
		create(h, "SHORT", "dup", nil)
		return map[string]any{
			"empty id":     answer(h, "SHORT", "create", map[string]any{"id": ""}),
			"duplicate id": answer(h, "SHORT", "create", map[string]any{"id": "dup"}),
			"unknown id":   answer(h, "SHORT", "status", map[string]any{"id": "never-created"}),
		}
	}},
}

// create makes instance id of binding with params; it fails the test if refused.
func create(h *harness, binding, id string, params any) {
	h.t.Helper()
	var out map[string]any
	if st := h.binding(binding, "create", map[string]any{"id": id, "params": params}, &out); st != 200 {
		h.t.Fatalf("create %s %s: %d %v", binding, id, st, out)
	}
}

// answer is the Worker's answer to op on binding: the JSON it returned, with the HTTP
// status when the call threw.
func answer(h *harness, binding, op string, body any) any {
	h.t.Helper()
	var out any
	if st := h.binding(binding, op, body, &out); st != 200 {
		return map[string]any{"status": st, "answer": out}
	}
	return out
}

// settled polls status() of instance id until it is complete, errored or terminated
// (60 s at most) and returns it.
func settled(h *harness, binding, id string) any {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st map[string]any
		h.binding(binding, "status", map[string]any{"id": id}, &st)
		switch st["status"] {
		case "complete", "errored", "terminated":
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s %s did not settle: %v", binding, id, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
