package render_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// TestDispatchBindingRenders: a dispatchNamespace binding is shim dispatch.js over an
// alias of the sidecar that names the dispatch namespace; the sidecar learns the domain
// its user Workers' Services resolve under.
func TestDispatchBindingRenders(t *testing.T) {
	w := inlineWorker("platform", "export default {}")
	w.Namespace = "sites"
	w.Spec.Bindings = []v1alpha1.Binding{{Name: "dispatcher", DispatchNamespace: &v1alpha1.DispatchNamespaceBinding{Namespace: "customers"}}}
	opts := render.Options{Outbound: outbound.Rules{Allow: outbound.DefaultAllow}, ManagerAPI: "https://mgr.example:9446"}
	out, err := render.Render(render.Input{Worker: w, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(fileByPath(t, out, podcontract.ConfigFile))
	for _, want := range []string{
		`(name = "dispatcher", wrapped = (moduleName = "workerd-operator:dispatch", innerBindings = [(name = "fetcher", service = "dispatch:dispatcher"), ` +
			`(name = "loader", workerLoader = (id = "user-workers:customers")), (name = "internet", service = "` + podcontract.DispatchLoaderService + `"), ` +
			`(name = "config", json = "{\"maxShared\":100}")]))`,
		// Shared user Workers' code reaches what a Dedicated one without spec.outbound
		// does: public addresses, never the cluster's (the default allow list's ranges).
		// (workerd's deny wins over allow).
		`(name = "` + podcontract.DispatchLoaderService + `", network = (allow = ["public", "10.96.0.0/12", "10.244.0.0/16"], deny = ["private", "10.96.0.0/12", "10.244.0.0/16",`,
		`(name = "dispatch:dispatcher", external = (http = (injectRequestHeaders = [(name = "` + podcontract.DispatchNamespaceHeader + `", value = "customers")])))`,
		`(name = "workerd-operator:dispatch", esModule = embed "shim/dispatch.js", internal = true)`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s", want)
		}
	}
	fileByPath(t, out, podcontract.ShimSubdir+"/dispatch.js")
	domain := sidecarEnv(out, podcontract.DispatchDomainEnv)
	if api := sidecarEnv(out, podcontract.DispatchAPIEnv); api != "https://mgr.example:9446" {
		t.Errorf("%s = %q, want the manager's internal API", podcontract.DispatchAPIEnv, api)
	}
	if domain != "sites.svc.cluster.local" {
		t.Errorf("%s = %q, want sites.svc.cluster.local", podcontract.DispatchDomainEnv, domain)
	}
	if !slices.Contains(render.SidecarAliases(w), "dispatch:dispatcher") {
		t.Errorf("aliases %v lack dispatch:dispatcher", render.SidecarAliases(w))
	}
}

// TestUserWorkerReachesNoClusterAddress: a user Worker's network service denies every
// private address and the cluster ranges of the operator's default allow list, even
// when its own spec.outbound allows them; its rpc Service is its dispatch name.
func TestUserWorkerReachesNoClusterAddress(t *testing.T) {
	w := inlineWorker("site-a", "export default {}")
	w.Spec.DispatchNamespace = "customers"
	w.Spec.Outbound = &v1alpha1.OutboundSpec{Allow: []string{"public", "10.96.0.0/12"}}
	opts := render.Options{Outbound: outbound.Rules{Allow: outbound.DefaultAllow}}
	out, err := render.Render(render.Input{Worker: w, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(fileByPath(t, out, podcontract.ConfigFile))
	want := `deny = ["private", "10.96.0.0/12", "10.244.0.0/16",`
	if !strings.Contains(cfg, want) {
		t.Errorf("config lacks %s:\n%s", want, cfg)
	}
	rpc := `(name = "rpc", http = (capnpConnectHost = "capnp.workerd-operator.internal", forwardedProtoHeader = "X-Forwarded-Proto"), service = "site-a")`
	if !strings.Contains(cfg, rpc) {
		t.Errorf("a user Worker's rpc socket does not take the dispatched URL's scheme: config lacks %s", rpc)
	}
	w.Spec.DispatchNamespace = ""
	plain, err := render.Render(render.Input{Worker: w, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(fileByPath(t, plain, podcontract.ConfigFile)), "forwardedProtoHeader") {
		t.Error("an ordinary Worker's rpc socket trusts X-Forwarded-Proto")
	}
	w.Spec.DispatchNamespace = "customers"
	if got := render.WorkerRPCServiceName(w); got != render.DispatchServiceName("customers", "site-a") || !strings.HasPrefix(got, "wfp-") || len(got) != len("wfp-12345678-site-a") {
		t.Errorf("rpc Service %q", got)
	}
	if render.DispatchServiceName("customers", "a") == render.DispatchServiceName("others", "a") {
		t.Error("two dispatch namespaces share a Service name")
	}
}

func sidecarEnv(out *render.Output, name string) string {
	for _, e := range out.SidecarEnv {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
