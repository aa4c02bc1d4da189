package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// TestPolicyFlags: the policy flags parse into webhook.Policy; without
// --allowed-runtime-images only the workerd repository is allowed.
func TestPolicyFlags(t *testing.T) {
	var p policyFlags
	fl := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	p.register(fl)
	if err := fl.Parse([]string{"--allowed-service-accounts=builder,ci", "--allowed-service-types=LoadBalancer",
		"--allow-node-placement", "--max-limit-profile=custom", "--max-workerd-cpu=1500m"}); err != nil {
		t.Fatal(err)
	}
	pol, err := p.build("ghcr.io/x/workerd")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pol.RuntimeImages, []string{"ghcr.io/x/workerd"}) || !slices.Equal(pol.ServiceAccounts, []string{"builder", "ci"}) ||
		len(pol.ServiceTypes) != 1 || !pol.NodePlacement || pol.MaxProfile != limits.Custom || pol.MaxCPU.MilliValue() != 1500 {
		t.Errorf("policy %+v", pol)
	}
	if _, err := (&policyFlags{maxCPU: "lots"}).build("r"); err == nil {
		t.Error("--max-workerd-cpu=lots accepted")
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
