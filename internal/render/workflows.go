package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/shim"
)

// Workflow rendering (issue 6; internal/sidecar/workflows; docs/workflows.md).
const (
	// WorkflowsRunnerService is the runner worker (shim workflows-runner.js).
	WorkflowsRunnerService = "workerd-operator:workflows-runner"
	// WorkflowsBindingModule is the wrapped-binding module behind env.<BINDING>.
	WorkflowsBindingModule = "workerd-operator:workflows-binding"
	// WorkflowsSidecarBinding is the runner's binding to the sidecar.
	WorkflowsSidecarBinding = "__sidecar"
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
	domain := opts.ClusterDomain
	if domain == "" {
		domain = DefaultClusterDomain
	}
	if ns == "" {
		ns = "default"
	}
	set := EngineSetName(name)
	return WorkflowTarget{Address: fmt.Sprintf("%s-0.%s.%s.svc.%s:%d", set, set, ns, domain, podcontract.SidecarPort)}
}

// WorkflowEngineArgs are the extra workerd args of an engine pod (docs/pod-contract.md).
func WorkflowEngineArgs() []string {
	return []string{fmt.Sprintf("--socket-addr=%s=$(POD_IP):%d", podcontract.WorkflowSocket, podcontract.RunnerPort)}
}

type wfRender struct {
	svcName string
	hosts   []WorkflowHost
	targets map[string]WorkflowTarget
	bound   map[string]bool
}

func newWFRender(in Input) (*wfRender, error) {
	r := &wfRender{svcName: WorkerServiceName(in.Worker.Name), targets: in.Workflows, bound: map[string]bool{}}
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

func (r *wfRender) hosted(name string) bool {
	for _, h := range r.hosts {
		if h.Name == name {
			return true
		}
	}
	return false
}

// binding renders spec.bindings[i].workflow: a wrapped binding over the engine's sidecar
// (the local sidecar when this pod hosts the engine).
func (r *wfRender) binding(field string, ref v1alpha1.LocalObjectReference) (string, error) {
	if ref.Name == "" {
		return "", fmt.Errorf("%s.workflow.name: required", field)
	}
	svc := podcontract.SidecarService
	if !r.hosted(ref.Name) {
		t, ok := r.targets[ref.Name]
		if !ok || t.Address == "" {
			return "", fmt.Errorf("%s.workflow.name: Workflow %q not found (or its engine has no address yet)", field, ref.Name)
		}
		r.bound[ref.Name] = true
		svc = "workflow:" + ref.Name
	}
	cfg, _ := json.Marshal(map[string]string{"workflow": ref.Name})
	return fmt.Sprintf("wrapped = (moduleName = %s, innerBindings = [(name = \"sidecar\", service = %s), (name = \"config\", json = %s)])",
		Quote(WorkflowsBindingModule), Quote(svc), Quote(string(cfg))), nil
}

func (r *wfRender) anyBinding() bool {
	return len(r.bound) > 0 || len(r.hosts) > 0
}

// services: the engines' external services and, in an engine pod, the runner worker.
func (r *wfRender) services() string {
	var c strings.Builder
	names := make([]string, 0, len(r.bound))
	for n := range r.bound {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&c, "    (name = %s, external = (address = %s, http = ())),\n", Quote("workflow:"+n), Quote(r.targets[n].Address))
	}
	if len(r.hosts) == 0 {
		return c.String()
	}
	fmt.Fprintf(&c, "    (name = %s, worker = (\n", Quote(WorkflowsRunnerService))
	fmt.Fprintf(&c, "      modules = [(name = \"workflows-runner.js\", esModule = embed %s), (name = \"workflows-step.js\", esModule = embed %s)],\n",
		Quote(podcontract.ShimSubdir+"/workflows-runner.js"), Quote(podcontract.ShimSubdir+"/workflows-step.js"))
	fmt.Fprintf(&c, "      compatibilityDate = %s,\n", Quote(ShimCompatibilityDate))
	fmt.Fprintf(&c, "      bindings = [\n        (name = %s, service = %s),\n", Quote(WorkflowsSidecarBinding), Quote(podcontract.SidecarService))
	for _, h := range r.hosts {
		fmt.Fprintf(&c, "        (name = %s, service = (name = %s, entrypoint = %s)),\n", Quote(h.Name), Quote(r.svcName), Quote(h.ClassName))
	}
	c.WriteString("      ],\n    )),\n")
	return c.String()
}

func (r *wfRender) sockets() string {
	if len(r.hosts) == 0 {
		return ""
	}
	return fmt.Sprintf("    (name = %s, http = (), service = %s),\n", Quote(podcontract.WorkflowSocket), Quote(WorkflowsRunnerService))
}

func (r *wfRender) extensionModules() string {
	if !r.anyBinding() {
		return ""
	}
	return fmt.Sprintf("    (name = %s, esModule = embed %s, internal = true),\n", Quote(WorkflowsBindingModule), Quote(podcontract.ShimSubdir+"/workflows-binding.js"))
}

// joinExtensions merges the workflow binding module into the `extensions` field rendered
// for Durable Objects (or makes the field).
func (r *wfRender) joinExtensions(doExt string) string {
	mods := r.extensionModules()
	if mods == "" {
		return doExt
	}
	const tail = "  ])],\n"
	if doExt == "" {
		return "  extensions = [(modules = [\n" + mods + tail
	}
	return strings.TrimSuffix(doExt, tail) + mods + tail
}

func (r *wfRender) files() ([]File, error) {
	var names []string
	if r.anyBinding() {
		names = append(names, "workflows-binding.js")
	}
	if len(r.hosts) > 0 {
		names = append(names, "workflows-runner.js", "workflows-step.js")
	}
	var out []File
	for _, n := range names {
		b, err := shim.Source(n)
		if err != nil {
			return nil, err
		}
		out = append(out, newFile(podcontract.ShimSubdir+"/"+n, b, false))
	}
	return out, nil
}
