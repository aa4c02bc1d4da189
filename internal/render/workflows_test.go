package render_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/workflows"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

const wfWorker = `import { WorkflowEntrypoint } from "cloudflare:workers";
export class Greeter extends WorkflowEntrypoint {
  async run(event, step) {
    const g = await step.do("greet", async () => "hello " + event.payload.who);
    return { g };
  }
}
export default {
  async fetch(req, env) {
    const body = await req.json();
    if (body.op === "create") return Response.json({ id: (await env.WF.create({ id: body.id, params: body.params })).id });
    return Response.json(await (await env.WF.get(body.id)).status());
  },
};`

func wfWorkerObj() *v1alpha1.Worker {
	return &v1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns"},
		Spec: v1alpha1.WorkerSpec{
			CompatibilityDate: "2026-09-10",
			Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{{
				Name: "worker.js", Type: v1alpha1.ModuleESModule, Content: ptr.To(wfWorker)}}}},
			Bindings: []v1alpha1.Binding{{Name: "WF", Workflow: &v1alpha1.LocalObjectReference{Name: "greet"}}},
		},
	}
}

func TestWorkflowBindingErrors(t *testing.T) {
	cases := []struct {
		name string
		in   render.Input
		want string
	}{
		{"unknown workflow", render.Input{Worker: wfWorkerObj()}, `spec.bindings[0].workflow.name: Workflow "greet" not found`},
		{"host without class", render.Input{Worker: wfWorkerObj(), WorkflowHosts: []render.WorkflowHost{{Name: "greet"}}}, "Input.WorkflowHosts[0]: name and className are required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := render.Render(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Render error %v, want %q", err, tc.want)
			}
		})
	}
	out, err := render.Render(render.Input{Worker: wfWorkerObj(), Workflows: map[string]render.WorkflowTarget{"greet": {Address: "greet-engine-0.greet-engine.ns.svc.cluster.local:9092"}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(out.Files[0].Data)
	for _, want := range []string{`service = "workflow:greet"`, `(name = "workflow:greet", external = (address = "greet-engine-0.greet-engine.ns.svc.cluster.local:9092"`, `"workerd-operator:workflows-binding"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s:\n%s", want, cfg)
		}
	}
}

// wfEngine is an engine pod rendered by the renderer: the pinned workerd and the real
// sidecar engine.
type wfEngine struct {
	t       testing.TB
	l       *localrun.Local
	sidecar string
	logs    *bytes.Buffer
}

func startWorkflowEngine(t testing.TB) *wfEngine {
	t.Helper()
	out, err := render.Render(render.Input{Worker: wfWorkerObj(), WorkflowHosts: []render.WorkflowHost{{Name: "greet", ClassName: "Greeter"}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	e := &wfEngine{t: t, sidecar: testenv.FreeLoopbackAddr(t), logs: &bytes.Buffer{}}
	e.l, err = localrun.StartLocal(context.Background(), localrun.LocalOptions{
		Binary: testenv.WorkerdBinary(t), Dir: dir, Output: e.logs,
		Sockets:   []string{podcontract.HTTPSocket, podcontract.RPCSocket, podcontract.HealthSocket, podcontract.TriggerSocket, podcontract.WorkflowSocket},
		Externals: map[string]string{podcontract.SidecarService: e.sidecar},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.l.Stop)
	srv, err := sidecar.New(sidecar.Options{Addr: e.sidecar, DataDir: t.TempDir(), Logs: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workflows.Attach(srv, workflows.Options{RunnerURL: "http://" + e.l.Addrs[podcontract.WorkflowSocket], Workflows: []api.WorkflowConfig{{Name: "greet"}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return e
}

// call posts body to the Worker's http socket and returns its JSON answer.
func (e *wfEngine) call(body map[string]any) map[string]any {
	t := e.t
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post("http://"+e.l.Addrs[podcontract.HTTPSocket]+"/", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rb, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(rb, &out); err != nil {
		t.Fatalf("%d %s\n%s", res.StatusCode, rb, e.logs.String())
	}
	return out
}

// runGreet creates instance id and polls its status until it settles; it returns the
// status and the number of calls made.
func (e *wfEngine) runGreet(id string) (map[string]any, int) {
	calls := 1
	if got := e.call(map[string]any{"op": "create", "id": id, "params": map[string]any{"who": "world"}}); got["id"] != id {
		e.t.Fatalf("create: %v", got)
	}
	var st map[string]any
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st = e.call(map[string]any{"op": "status", "id": id})
		calls++
		if st["status"] == "complete" || st["status"] == "errored" || time.Now().After(deadline) {
			return st, calls
		}
	}
}

// An engine pod rendered by the renderer runs a workflow end to end on the pinned workerd
// with the real sidecar engine: binding create -> runner -> step -> complete.
func TestWorkflowEngineRendered(t *testing.T) {
	e := startWorkflowEngine(t)
	st, _ := e.runGreet("g1")
	if out, _ := json.Marshal(st); string(out) != `{"output":{"g":"hello world"},"status":"complete"}` {
		t.Fatalf("status() = %s\n%s", out, e.logs.String())
	}
}
