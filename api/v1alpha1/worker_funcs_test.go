package v1alpha1

import (
	"testing"

	"k8s.io/utils/ptr"
)

func versionFixture() *WorkerSpec {
	return &WorkerSpec{
		CompatibilityDate:  "2026-11-01",
		CompatibilityFlags: []string{"nodejs_compat", "a_flag"},
		Source:             WorkerSource{Inline: &InlineSource{Modules: []Module{{Name: "w.js", Type: ModuleESModule, Content: ptr.To("export default {}")}}}},
		Bindings:           []Binding{{Name: "B", Text: ptr.To("b")}, {Name: "A", Text: ptr.To("a")}},
	}
}

// TestVersionID: a version is the code, bindings and settings
// (https://developers.cloudflare.com/workers/versions-and-deployments/#versions): they
// change the id; replicas, pod, service and the deployment do not, nor the order of a
// set's or map's entries.
func TestVersionID(t *testing.T) {
	base := versionFixture().VersionID()
	if len(base) != 16 {
		t.Fatalf("id %q, want 16 hex characters", base)
	}
	cases := []struct {
		name    string
		mutate  func(*WorkerSpec)
		changes bool
	}{
		{"code", func(s *WorkerSpec) { s.Source.Inline.Modules[0].Content = ptr.To("export default {fetch(){}}") }, true},
		{"binding value", func(s *WorkerSpec) { s.Bindings[0].Text = ptr.To("c") }, true},
		{"compatibility date", func(s *WorkerSpec) { s.CompatibilityDate = "2026-11-02" }, true},
		{"limits", func(s *WorkerSpec) { s.Limits = &WorkerLimits{CPUMs: ptr.To[int64](50)} }, true},
		{"replicas", func(s *WorkerSpec) { s.Replicas = ptr.To[int32](5) }, false},
		{"pod", func(s *WorkerSpec) { s.Pod = &PodOverrides{Labels: map[string]string{"a": "b"}} }, false},
		{"service", func(s *WorkerSpec) { s.Service = &WorkerServiceSpec{Port: ptr.To[int32](80)} }, false},
		{"deployment", func(s *WorkerSpec) {
			s.Deployment = &WorkerDeployment{Versions: []DeploymentVersion{{VersionID: LatestVersion, Percentage: 100}}}
		}, false},
		{"flag order", func(s *WorkerSpec) { s.CompatibilityFlags = []string{"a_flag", "nodejs_compat"} }, false},
		{"binding order", func(s *WorkerSpec) { s.Bindings[0], s.Bindings[1] = s.Bindings[1], s.Bindings[0] }, false},
	}
	for _, c := range cases {
		s := versionFixture()
		c.mutate(s)
		if got := s.VersionID(); (got != base) != c.changes {
			t.Errorf("%s: id %s vs %s, changed %v, want %v", c.name, got, base, got != base, c.changes)
		}
	}
	s := versionFixture()
	s.VersionID()
	if s.Bindings[0].Name != "B" || s.CompatibilityFlags[0] != "nodejs_compat" {
		t.Error("VersionID reordered the spec it was called on")
	}
}

// TestDeployedVersions: no deployment is the spec's version at 100 percent; "latest"
// is the spec's version; the primary is the larger share, the first on a tie.
func TestDeployedVersions(t *testing.T) {
	s := versionFixture()
	id := s.VersionID()
	if got := s.DeployedVersions(); len(got) != 1 || got[0] != (DeploymentVersion{VersionID: id, Percentage: 100}) {
		t.Errorf("no deployment: %+v", got)
	}
	s.Deployment = &WorkerDeployment{Versions: []DeploymentVersion{{VersionID: "0123456789abcdef", Percentage: 90}, {VersionID: LatestVersion, Percentage: 10}}}
	got := s.DeployedVersions()
	if got[1].VersionID != id || s.Deployment.Versions[1].VersionID != LatestVersion {
		t.Errorf("latest resolved to %+v (spec now %+v)", got, s.Deployment.Versions)
	}
	if p := PrimaryVersion(got); p.VersionID != "0123456789abcdef" {
		t.Errorf("primary %+v, want the 90 percent one", p)
	}
	if p := PrimaryVersion([]DeploymentVersion{{VersionID: "a", Percentage: 50}, {VersionID: "b", Percentage: 50}}); p.VersionID != "a" {
		t.Errorf("tie: primary %s, want the first", p.VersionID)
	}
	if p := PrimaryVersion([]DeploymentVersion{{VersionID: "a", Percentage: 40}, {VersionID: "b", Percentage: 60}}); p.VersionID != "b" {
		t.Errorf("primary %s, want b (60)", p.VersionID)
	}
}
