package render

import (
	"fmt"
	"sort"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Workflow rendering (docs/workflows.md): the engine runs in the sidecar of a Workflow's
// engine pod (internal/sidecar).
const (
	// WorkflowsRunnerService is the runner worker (shim workflows-runner.js).
	WorkflowsRunnerService = "workerd-operator:workflows-runner"
	// WorkflowsBindingModule is the wrapped-binding module behind env.<BINDING>.
	WorkflowsBindingModule = "workerd-operator:workflows-binding"
	// Shim files.
	workflowsBindingFile = "workflows-binding.js"
	workflowsRunnerFile  = "workflows-runner.js"
	workflowsStepFile    = "workflows-step.js"
)

// WorkflowTarget is where a Workflow's engine answers: "host:port" of its sidecar
// (the engine shard's pod DNS name and podcontract.SidecarPort).
type WorkflowTarget struct {
	Address string
}

// WorkflowHost is a Workflow whose engine runs in the pods being rendered: its name and
// the WorkflowEntrypoint class exported by the Worker.
type WorkflowHost struct {
	Name      string
	ClassName string
}

// EngineSetName is the name of the StatefulSet and headless Service of a Workflow's
// engine: "<name>-wf". Engine shard i is pod "<name>-wf-<i>".
func EngineSetName(name string) string { return name + "-wf" }

// WorkflowTargetFor is where Workflow name in namespace ns answers: the sidecar of its
// engine shard 0, "<name>-wf-0.<name>-wf.<ns>.svc.<domain>:9092" (one engine shard per
// Workflow; docs/workflows.md).
func WorkflowTargetFor(ns, name string, opts Options) WorkflowTarget {
	set := EngineSetName(name)
	return WorkflowTarget{Address: fmt.Sprintf("%s-0.%s.%s.svc.%s:%d", set, set, namespaceOr(ns), clusterDomain(opts), podcontract.SidecarPort)}
}

// WorkflowEngineArgs are the extra workerd args of an engine pod (docs/pod-contract.md):
// the workflows socket, which only the pod's own sidecar calls, on the loopback.
func WorkflowEngineArgs() []string {
	return []string{fmt.Sprintf("--socket-addr=%s=%s:%d", podcontract.WorkflowSocket, podcontract.LoopbackHost, podcontract.RunnerPort)}
}

// workflowKind renders workflow bindings and, on an engine pod (Input.WorkflowHosts),
// the runner worker the engine calls to run an instance.
type workflowKind struct {
	in      Input
	svcName string
	hosts   []WorkflowHost
	targets map[string]WorkflowTarget
	bound   map[string]WorkflowTarget // engines reached over the network, by Workflow
}

func newWorkflowKind(in Input) (bindingKind, error) {
	r := &workflowKind{in: in, svcName: WorkerServiceName(in.Worker.Name), targets: in.Workflows, bound: map[string]WorkflowTarget{}}
	r.hosts = append(r.hosts, in.WorkflowHosts...)
	sort.Slice(r.hosts, func(i, j int) bool { return r.hosts[i].Name < r.hosts[j].Name })
	for i, h := range r.hosts {
		if h.Name == "" || h.ClassName == "" {
			return nil, fmt.Errorf("Input.WorkflowHosts[%d]: name and className are required (Workflow spec.className)", i)
		}
		if i > 0 && r.hosts[i-1].Name == h.Name {
			return nil, fmt.Errorf("Input.WorkflowHosts: duplicate workflow %q", h.Name)
		}
	}
	return r, nil
}

func (r *workflowKind) hosted(name string) bool {
	for _, h := range r.hosts {
		if h.Name == name {
			return true
		}
	}
	return false
}

func engineService(workflow string) string { return "workflow:" + workflow }

// bind renders a wrapped binding over the engine's sidecar (the local sidecar when this
// pod hosts the engine).
func (r *workflowKind) bind(field string, b v1alpha1.Binding) (string, error) {
	name := b.Workflow.Name
	if name == "" {
		return "", fmt.Errorf("%s.workflow.name: required", field)
	}
	svc := podcontract.SidecarService
	if !r.hosted(name) {
		t, ok := r.targets[name]
		if !ok || t.Address == "" {
			return "", fmt.Errorf("%s.workflow.name: Workflow %q not found (or its engine has no address yet)", field, name)
		}
		r.bound[name] = t
		svc = engineService(name)
	}
	return sidecarWrapped(WorkflowsBindingModule, svc, map[string]string{"workflow": name}), nil
}

// contribute adds the engines' external services and, on an engine pod, the runner
// worker and its socket, plus the binding module.
func (r *workflowKind) contribute(x *extras) error {
	for _, n := range sortedKeys(r.bound) {
		x.services.item(named(engineService(n)), kv("external", external(r.in.Options, r.in.Worker.Namespace, r.bound[n].Address, "()")))
	}
	var shims []string
	if len(r.bound) > 0 || len(r.hosts) > 0 {
		x.addExtension(WorkflowsBindingModule, workflowsBindingFile)
		shims = append(shims, workflowsBindingFile)
	}
	if len(r.hosts) > 0 {
		r.writeRunner(x)
		shims = append(shims, workflowsRunnerFile, workflowsStepFile)
	}
	return x.addShims(shims...)
}

func (r *workflowKind) writeRunner(x *extras) {
	c := &x.services
	c.openWorker(WorkflowsRunnerService)
	c.field("modules", list(shimModule(workflowsRunnerFile), shimModule(workflowsStepFile)))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	// The runner needs no binding to the sidecar: the engine opens each run's socket.
	c.open("bindings = [")
	for _, h := range r.hosts {
		c.item(named(h.Name), kv("service", tuple(named(r.svcName), kv("entrypoint", Quote(h.ClassName)))))
	}
	c.close("],")
	c.closeWorker()
	x.sockets.item(named(podcontract.WorkflowSocket), "http = ()", kv("service", Quote(WorkflowsRunnerService)))
}
