package worker

import (
	"reflect"
	"testing"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// TestPlanDeployment: the Deployments move to the deployed versions without a request
// sent towards pods that are not there.
func TestPlanDeployment(t *testing.T) {
	one := func(id string) []fleetv1alpha1.DeploymentVersion {
		return []fleetv1alpha1.DeploymentVersion{{VersionID: id, Percentage: 100}}
	}
	split := []fleetv1alpha1.DeploymentVersion{{VersionID: "a", Percentage: 90}, {VersionID: "b", Percentage: 10}}
	toA := []fleetv1alpha1.DeploymentVersion{{VersionID: "a", Percentage: 100}, {VersionID: "b", Percentage: 0}}
	up := func(v string, split bool) liveSet {
		return liveSet{exists: true, version: v, available: true, rolled: true, split: split}
	}
	rolling := func(v string, split bool) liveSet {
		return liveSet{exists: true, version: v, available: true, split: split}
	}
	cases := []struct {
		name               string
		deployed           []fleetv1alpha1.DeploymentVersion
		primary, secondary liveSet
		want               plan
	}{
		{"one version, nothing else", one("a"), up("a", false), liveSet{},
			plan{primary: slot{version: "a"}}},
		{"split begins: the second version's pods split towards the first, the first waits", split, up("a", false), liveSet{},
			plan{primary: slot{version: "a"}, secondary: slot{version: "b", split: split}}},
		{"second version available: both split", split, up("a", false), rolling("b", true),
			plan{primary: slot{version: "a", split: split}, secondary: slot{version: "b", split: split}}},
		{"the canary changes version: the first stops splitting until it is available", split, up("a", true), rolling("c", true),
			plan{primary: slot{version: "a"}, secondary: slot{version: "b", split: split}}},
		{"rollback, the first still splits: the split Deployment stays, sending every request on", one("a"), up("a", true), up("b", true),
			plan{primary: slot{version: "a"}, secondary: slot{version: "b", split: toA}}},
		{"rollback, the first rolling: kept, sending on", one("a"), rolling("a", false), up("b", true),
			plan{primary: slot{version: "a"}, secondary: slot{version: "b", split: toA}}},
		{"rollback, the first not available: kept, serving alone", one("a"), liveSet{exists: true, version: "a"}, up("b", true),
			plan{primary: slot{version: "a"}, secondary: slot{version: "b"}}},
		{"rollback done: the split Deployment is scaled to zero", one("a"), up("a", false), up("b", false),
			plan{primary: slot{version: "a"}, retireSecondary: true}},
		{"promote: the first moves to b, the split Deployment stays meanwhile", one("b"), up("a", true), up("b", true),
			plan{primary: slot{version: "b"}, secondary: slot{version: "b"}}},
		{"larger share moves to b: b runs in the Worker's Deployment", []fleetv1alpha1.DeploymentVersion{{VersionID: "a", Percentage: 40}, {VersionID: "b", Percentage: 60}}, up("a", true), up("b", true),
			plan{primary: slot{version: "b"}, secondary: slot{version: "a"}}},
	}
	cases = append(cases, struct {
		name               string
		deployed           []fleetv1alpha1.DeploymentVersion
		primary, secondary liveSet
		want               plan
	}{"a retired split Deployment counts as none", one("a"), up("a", false), readLive(nil, nil), plan{primary: slot{version: "a"}}})
	for _, c := range cases {
		if got := planDeployment(c.deployed, c.primary, c.secondary); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
