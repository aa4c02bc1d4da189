package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/workerd-operator/workerd-operator/internal/limits"
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
