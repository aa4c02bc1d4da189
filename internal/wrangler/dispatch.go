package wrangler

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// dispatchDocs says how dispatch namespaces map (Workers for Platforms).
const dispatchDocs = "docs/dispatch.md"

// dispatchNamespaces become dispatchNamespace bindings
// (https://developers.cloudflare.com/cloudflare-for-platforms/workers-for-platforms/get-started/configuration/).
// `remote` only concerns wrangler dev. A name that is not a DNS label is made one,
// with a note: the namespace's user Workers must be deployed with that name.
func (c *converter) dispatchNamespaces(path string, v any) {
	for i, e := range list(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		binding, ns := str(m, "binding"), str(m, "namespace")
		if !ok || binding == "" || ns == "" {
			c.unsupported(p, "needs binding and namespace")
			continue
		}
		for _, k := range sortedKeys(m) {
			switch k {
			case "binding", "namespace", "remote":
			case "outbound":
				c.unsupported(p+".outbound", "outbound Workers (a Worker that sees every fetch() of the user Workers) are not supported yet; see "+dispatchDocs)
			default:
				c.unsupported(p+"."+k, unknownReason)
			}
		}
		name := DispatchNamespaceName(ns)
		if name != ns {
			c.res.Notes = append(c.res.Notes, fmt.Sprintf("%s.namespace: %q is not a DNS label, so the binding names dispatch namespace %q: deploy its user Workers with --dispatch-namespace %s (%s)", p, ns, name, name, dispatchDocs))
		}
		c.addBinding(v1alpha1.Binding{Name: binding, DispatchNamespace: &v1alpha1.DispatchNamespaceBinding{Namespace: name}})
	}
}

// DispatchNamespaceName is the dispatch namespace a configuration's or an upload's name
// stands for: the name itself when it is a DNS label, else the label dispatch_namespaces
// maps it to (dnsName), so that a binding and its user Workers agree.
func DispatchNamespaceName(ns string) string {
	if len(validation.IsDNS1123Label(ns)) == 0 {
		return ns
	}
	return dnsName(ns)
}

// CheckDispatchNamespace checks a --dispatch-namespace value: it becomes
// spec.dispatchNamespace and a pod label value, both DNS labels.
func CheckDispatchNamespace(ns string) error {
	if len(validation.IsDNS1123Label(ns)) == 0 {
		return nil
	}
	return fmt.Errorf("--dispatch-namespace %q: must be a DNS label: at most %d lowercase letters, digits and '-', starting and ending with a letter or digit, e.g. %s (spec.dispatchNamespace; %s)",
		ns, validation.DNS1123LabelMaxLength, dnsName(ns), dispatchDocs)
}

// userWorker makes the Worker a user Worker of dispatch namespace ns ("": none), as
// wrangler deploy --dispatch-namespace uploads it into one.
func (r *Result) userWorker(file, ns string) error {
	if ns == "" {
		return nil
	}
	if err := CheckDispatchNamespace(ns); err != nil {
		return err
	}
	if err := checkUserWorkerName(r.Worker.Name); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	r.Worker.Spec.DispatchNamespace = ns
	return nil
}

// checkUserWorkerName refuses a user Worker whose name its rpc Service's name
// ("wfp-<8 hex digits>-<name>", a DNS label) cannot hold.
func checkUserWorkerName(name string) error {
	if len(name) <= render.MaxUserWorkerName {
		return nil
	}
	return fmt.Errorf("--dispatch-namespace: Worker name %q is %d characters; a user Worker's name may be at most %d, since its rpc Service is named wfp-<8 hex digits>-<name>, "+
		"a DNS label of at most %d characters: set a shorter name in the configuration (%s)", name, len(name), render.MaxUserWorkerName, validation.DNS1123LabelMaxLength, dispatchDocs)
}
