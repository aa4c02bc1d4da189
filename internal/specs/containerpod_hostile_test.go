package specs

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// TestHostileContainerPodArgsAreNotExpanded: Docker passes Cmd and Env literally; the
// kubelet expands $(NAME) in a container's args and env values from its environment.
// An entrypoint or envVars holding "$(...)" (a shell snippet, a template) reaches the
// process changed, and one env value can copy another into itself. Kubernetes'
// escape is "$$(".
func TestHostileContainerPodArgsAreNotExpanded(t *testing.T) {
	d := &fleetv1alpha1.DurableObjectNamespace{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rooms"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{Container: &fleetv1alpha1.ContainerSpec{Image: "registry.example/app:1", MaxInstances: ptr.To[int32](1)}}}
	shard := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rooms-shards-0", UID: "u"}}
	p := BuildContainerPod(ContainerInstance{DONS: d, ShardPod: shard, Name: "one",
		Args: []string{"sh", "-c", "echo $(CLOUDFLARE_DURABLE_OBJECT_ID)"},
		Env:  []string{"CLOUDFLARE_DURABLE_OBJECT_ID=abc", "TEMPLATE=$(CLOUDFLARE_DURABLE_OBJECT_ID)"}}, DefaultOptions())
	c := p.Spec.Containers[0]
	if a := c.Args[2]; strings.Contains(strings.ReplaceAll(a, "$$(", ""), "$(") {
		t.Errorf("arg %q reaches the kubelet unescaped: it runs as %q, not as Docker would run it", a, "echo abc")
	}
	for _, e := range c.Env {
		if strings.Contains(strings.ReplaceAll(e.Value, "$$(", ""), "$(") {
			t.Errorf("env %s=%q reaches the kubelet unescaped: the process sees %q", e.Name, e.Value, "abc")
		}
	}
}
