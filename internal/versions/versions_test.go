package versions_test

import (
	"reflect"
	"strings"
	"testing"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/versions"
)

// TestParse: wrangler's VERSION-ID@PERCENTAGE arguments: one or two, each 1 to 100,
// adding up to 100 (https://developers.cloudflare.com/workers/wrangler/commands/#versions-deploy).
func TestParse(t *testing.T) {
	const a, b = "0123456789abcdef", "fedcba9876543210"
	cases := []struct {
		args    []string
		want    []fleetv1alpha1.DeploymentVersion
		wantErr string
	}{
		{[]string{a + "@100"}, []fleetv1alpha1.DeploymentVersion{{VersionID: a, Percentage: 100}}, ""},
		{[]string{a + "@90", "latest@10"}, []fleetv1alpha1.DeploymentVersion{{VersionID: a, Percentage: 90}, {VersionID: "latest", Percentage: 10}}, ""},
		{[]string{a + "@90", b + "@20"}, nil, "add up to 110"},
		{[]string{a + "@90"}, nil, "add up to 90"},
		{[]string{a}, nil, "VERSION-ID@PERCENTAGE"},
		{[]string{a + "@0", b + "@100"}, []fleetv1alpha1.DeploymentVersion{{VersionID: a, Percentage: 0}, {VersionID: b, Percentage: 100}}, ""},
		{[]string{a + "@-1", b + "@101"}, nil, "from 0 to 100"},
		{[]string{"@100"}, nil, "VERSION-ID@PERCENTAGE"},
		{[]string{a + "@50", b + "@25", "latest@25"}, nil, "one or two"},
	}
	for _, tc := range cases {
		got, err := versions.Parse(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "docs/versions.md") {
				t.Errorf("Parse(%q) error %v, want one saying %q and naming docs/versions.md", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}
