package webhook

import (
	"strings"
	"testing"
)

// TestHostileContainerImagePrefixTricks: a hostile author picks spec.container.image to
// escape the admin's --allowed-container-images (docs/security-policy.md: "an exact
// image, a repository (its tags and digests) ...").
func TestHostileContainerImagePrefixTricks(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		why     string
		image   string
		allowed []string
	}{
		// A short Docker Hub name "alpine" is docker.io/library/alpine; "alpine/socat" is
		// docker.io/alpine/socat, another publisher's account entirely.
		{"short official name allows another Docker Hub account", "alpine/socat:latest", []string{"alpine"}},
		{"short official name allows another Docker Hub account (no tag)", "nginx/evil", []string{"nginx"}},
		// A repository entry allows its tags and digests, not other repositories below it.
		{"repository entry allows a nested repository", "ghcr.io/org/app/other:1", []string{"ghcr.io/org/app"}},
		// An exact image with a tag pins that tag; name:tag@digest pulls the digest and
		// ignores the tag, so any image of the repository runs.
		{"exact tag entry allows any digest", "registry.example/app:1" + digest, []string{"registry.example/app:1"}},
		// A registry host without "/" is not a registry prefix: another port is another registry.
		{"host entry allows another port of the host", "registry.example:5000/evil:1", []string{"registry.example"}},
	} {
		if ImageAllowed(tc.image, tc.allowed) {
			t.Errorf("%s: ImageAllowed(%q, %q) = true; want false", tc.why, tc.image, tc.allowed)
		}
	}
	// Sanity: what the policy documents stays allowed.
	for _, tc := range []struct{ image, allowed string }{
		{"ghcr.io/org/app:1", "ghcr.io/org/app"},
		{"ghcr.io/org/app" + digest, "ghcr.io/org/app"},
		{"registry.example/team/x:1", "registry.example/team/"},
		{"registry.example/app:1", "registry.example/app:1"},
	} {
		if !ImageAllowed(tc.image, []string{tc.allowed}) {
			t.Errorf("ImageAllowed(%q, %q) = false; want true", tc.image, tc.allowed)
		}
	}
}
