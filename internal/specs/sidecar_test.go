package specs

import (
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// The sidecar learns its container's memory limit (downward API) and sets its Go
// memory limit from it, so the collector works harder before the kernel kills it.
func TestSidecarMemoryLimitEnv(t *testing.T) {
	c := sidecarContainerSpec(DefaultOptions())
	for _, e := range c.Env {
		if e.Name != podcontract.MemoryLimitEnv {
			continue
		}
		ref := e.ValueFrom
		if ref == nil || ref.ResourceFieldRef == nil || ref.ResourceFieldRef.Resource != "limits.memory" ||
			ref.ResourceFieldRef.ContainerName != podcontract.SidecarContainer {
			t.Fatalf("%s: %+v, want resourceFieldRef limits.memory of the sidecar container", e.Name, e.ValueFrom)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Fatal("the sidecar container has no memory limit")
		}
		return
	}
	t.Fatalf("sidecar env %+v has no %s", c.Env, podcontract.MemoryLimitEnv)
}
