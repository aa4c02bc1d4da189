package podcontract

import (
	"strings"
	"testing"
)

func TestImageWorkerdVersion(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("a", 64)
	for image, want := range map[string]string{
		"ghcr.io/workerd-operator/workerd:1.20261110.1":         "1.20261110.1",
		"registry.local:5000/workerd:1.20261110.1" + digest:     "1.20261110.1",
		"registry.local:5000/workerd" + digest:                  "",
		"registry.local:5000/workerd":                           "",
		"ghcr.io/workerd-operator/workerd:latest":               "",
		"ghcr.io/workerd-operator/workerd:1.2026111.1":          "", // not a date
		"ghcr.io/workerd-operator/workerd:v1.20261110.1":        "",
		"registry.local:5000/team/workerd:1.20261110.1-patched": "",
	} {
		if got := ImageWorkerdVersion(image); got != want {
			t.Errorf("ImageWorkerdVersion(%q) = %q, want %q", image, got, want)
		}
	}
}
