package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// TestPolicyFlags: the policy flags parse into webhook.Policy; without
// --allowed-runtime-images only the workerd repository is allowed.
func TestPolicyFlags(t *testing.T) {
	var p policyFlags
	fl := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	p.register(fl)
	if err := fl.Parse([]string{"--allowed-service-accounts=builder,ci", "--allowed-service-types=LoadBalancer", "--allowed-workerd-versions=1.20261110.1,*",
		"--allow-node-placement", "--max-limit-profile=custom", "--max-workerd-cpu=1500m"}); err != nil {
		t.Fatal(err)
	}
	pol, err := p.build("ghcr.io/x/workerd")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pol.RuntimeImages, []string{"ghcr.io/x/workerd"}) || !slices.Equal(pol.ServiceAccounts, []string{"builder", "ci"}) ||
		len(pol.ServiceTypes) != 1 || !pol.NodePlacement || pol.MaxProfile != limits.Custom || pol.MaxCPU.MilliValue() != 1500 ||
		!slices.Equal(pol.WorkerdVersions, []string{"1.20261110.1", "*"}) {
		t.Errorf("policy %+v", pol)
	}
	if _, err := (&policyFlags{maxCPU: "lots"}).build("r"); err == nil {
		t.Error("--max-workerd-cpu=lots accepted")
	}
	if _, err := (&policyFlags{maxCPU: "1", workerdVersions: []string{"latest"}}).build("r"); err == nil || !strings.Contains(err.Error(), "--allowed-workerd-versions") {
		t.Errorf("--allowed-workerd-versions=latest: %v", err)
	}
}

// TestOperatorWorkerdVersion: the webhooks take the operator's own workerd from
// --workerd-image's tag, and the pinned release when the tag names none.
func TestOperatorWorkerdVersion(t *testing.T) {
	for image, want := range map[string]string{
		"ghcr.io/workerd-operator/workerd:1.20261110.1":                              "1.20261110.1",
		"registry.local:5000/workerd:1.20261110.1@sha256:" + strings.Repeat("a", 64): "1.20261110.1",
		"ghcr.io/workerd-operator/workerd@sha256:" + strings.Repeat("a", 64):         podcontract.WorkerdVersion,
		"registry.local:5000/workerd:edge":                                           podcontract.WorkerdVersion,
	} {
		f := &managerFlags{opts: specs.DefaultOptions(), defaultProfile: "paid", policy: policyFlags{maxCPU: "1"}}
		f.opts.WorkerdImage = image
		o, err := webhookOptions(f)
		if err != nil || o.WorkerdVersion != want {
			t.Errorf("--workerd-image=%s: version %q (%v), want %q", image, o.WorkerdVersion, err, want)
		}
	}
}

// TestIsolationFlags: the isolation flags reach specs.Options; by default none is set
// (hostUsers stays the Kubernetes default).
func TestIsolationFlags(t *testing.T) {
	parse := func(args ...string) (specs.Options, error) {
		var i isolationFlags
		fl := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		i.register(fl)
		if err := fl.Parse(args); err != nil {
			t.Fatal(err)
		}
		o := specs.DefaultOptions()
		return o, i.apply(&o)
	}
	o, err := parse("--workerd-runtime-class=gvisor", "--workerd-host-users=false", "--workerd-emptydir-size-limit=256Mi")
	if err != nil || o.RuntimeClassName != "gvisor" || o.HostUsers || o.EmptyDirSizeLimit == nil || o.EmptyDirSizeLimit.String() != "256Mi" {
		t.Errorf("options %+v, %v", o, err)
	}
	if o, err := parse(); err != nil || o.RuntimeClassName != "" || !o.HostUsers || o.EmptyDirSizeLimit != nil {
		t.Errorf("default options %+v, %v", o, err)
	}
	if _, err := parse("--workerd-emptydir-size-limit=lots"); err == nil {
		t.Error("--workerd-emptydir-size-limit=lots accepted")
	}
}

// TestOutboundFlags: --outbound-default-allow renders into every Worker and bounds
// spec.outbound.allow unless --allowed-outbound is set; --outbound-deny applies to all
// (and to R2Bucket endpoints at admission);
// an entry that is neither a CIDR nor a token names its flag.
func TestOutboundFlags(t *testing.T) {
	var p policyFlags
	fl := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	p.register(fl)
	if err := fl.Parse([]string{"--outbound-deny=169.254.169.254"}); err != nil {
		t.Fatal(err)
	}
	rules, bound, err := p.outbound([]string{"public", "10.96.0.0/12"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rules.Allow, []string{"public", "10.96.0.0/12"}) || !slices.Equal(rules.Deny, []string{"169.254.169.254/32"}) || !slices.Equal(bound, rules.Allow) {
		t.Errorf("rules %+v, bound %v", rules, bound)
	}
	// The webhook refuses R2Bucket endpoints in the same (parsed) deny list.
	if pol, err := p.build("r"); err != nil || !slices.Equal(pol.OutboundDeny, rules.Deny) {
		t.Errorf("webhook policy deny %v, %v; want %v", pol.OutboundDeny, err, rules.Deny)
	}
	if err := fl.Parse([]string{"--allowed-outbound=public,private"}); err != nil {
		t.Fatal(err)
	}
	if _, bound, _ = p.outbound([]string{"public"}); !slices.Equal(bound, []string{"public", "private"}) {
		t.Errorf("bound %v, want --allowed-outbound", bound)
	}
	if _, _, err := p.outbound([]string{"internet"}); err == nil || !strings.Contains(err.Error(), "--outbound-default-allow") {
		t.Errorf("bad default: %v", err)
	}
}
