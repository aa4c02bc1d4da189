package render

import (
	"fmt"

	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// renderOutbound adds the network service the user Worker's fetch() and connect() go
// through (workerd's "internet", with spec.outbound and the operator's defaults) and
// points the Worker's globalOutbound at it. TLS to public hosts is verified against the
// system trust store (trustBrowserCas), as workerd's implicit internet service does.
func renderOutbound(in Input, x *extras) error {
	var allow, deny []string
	if o := in.Worker.Spec.Outbound; o != nil {
		var err error
		if allow, err = parseEntries("spec.outbound.allow", o.Allow); err != nil {
			return err
		}
		if deny, err = parseEntries("spec.outbound.deny", o.Deny); err != nil {
			return err
		}
	}
	r := outbound.Effective(allow, deny, in.Options.Outbound)
	if in.Worker.Spec.DispatchNamespace != "" {
		r = outbound.UserWorker(r, in.Options.Outbound)
	}
	if in.Worker.Spec.Outbound == nil && len(r.Allow) == 0 && len(r.Deny) == 0 {
		return nil
	}
	r = outbound.Rendered(r)
	// No allow list at all: workerd's own default, public addresses only.
	var network []string
	if len(r.Allow) > 0 {
		network = append(network, kv("allow", list(quoteAll(r.Allow)...)))
	}
	if len(r.Deny) > 0 {
		network = append(network, kv("deny", list(quoteAll(r.Deny)...)))
	}
	network = append(network, kv("tlsOptions", "(trustBrowserCas = true)"))
	x.services.item(named(podcontract.InternetService), kv("network", tuple(network...)))
	x.worker.field("globalOutbound", Quote(podcontract.InternetService))
	return nil
}

// parseEntries checks the entries of one list; an error names the entry's field.
func parseEntries(field string, entries []string) ([]string, error) {
	out := make([]string, 0, len(entries))
	for i, e := range entries {
		p, err := outbound.Parse(e)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %v (see %s)", field, i, err, outbound.Doc)
		}
		out = append(out, p)
	}
	return out, nil
}
