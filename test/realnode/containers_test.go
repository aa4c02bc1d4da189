package realnode

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/workerd-operator/workerd-operator/internal/deploy"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// containerAnswer is the template's server's answer (container_src/main.go) with the
// class's envVars.MESSAGE (src/index.ts); Cloudflare sets CLOUDFLARE_DURABLE_OBJECT_ID
// to the object's id, 64 hex digits.
var containerAnswer = regexp.MustCompile(`^Hi, I'm a container and this is my message: "I was passed in via the container class!", my instance ID is: ([0-9a-f]{64})$`)

// boxAnswerID is the id in the server's answer to the boxes of containerscale_test.go.
var boxAnswerID = regexp.MustCompile(`my instance ID is: ([0-9a-f]{64})$`)

// TestContainersTemplate deploys Cloudflare's containers-template unchanged (its
// Dockerfile's server built without Docker, testenv.ServerImage, and named with
// --container-image): each object's container runs as a Pod of the node, restricted and
// owned by its shard; /container/<id> reaches the object's own instance, a killed
// instance is started again by the next request, and Cloudflare's Playwright spec passes.
func TestContainersTemplate(t *testing.T) {
	requireNode(t)
	const name = "containers-template"
	image, _, err := testenv.ServerImage(filepath.Join(repoRoot, "test", "testdata", "cloudflare-templates", name, "container_src"),
		registryHost+"/realnode/containers-template-server:1")
	if err != nil {
		t.Fatal(err)
	}
	url := deployTemplate(t, name, func(o *deploy.Options) { o.ContainerImages = map[string]string{"MyContainer": image} })
	start := time.Now()
	first := containerID(t, url+"/container/one")
	t.Logf("cold start of an instance (a Pod): %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if again := containerID(t, url+"/container/one"); again != first {
		t.Errorf("/container/one answered from object %s, then %s", first, again)
	}
	t.Logf("warm request: %s", time.Since(start).Round(time.Millisecond))
	if other := containerID(t, url+"/container/two"); other == first {
		t.Errorf("/container/two answered from /container/one's object %s", first)
	}
	pods := instancePods(t, "containers-template-my-container")
	if len(pods) != 2 {
		t.Fatalf("%d instance pods, want 2 (one per object)", len(pods))
	}
	for _, p := range pods {
		checkInstancePod(t, p, image)
	}
	// A crash: the instance's pod is gone (exit 137, as an OOM kill); the library
	// starts it again on the next request.
	victim := podOf(t, pods, first)
	var victimUID types.UID
	for _, p := range pods {
		if p.Name == victim {
			victimUID = p.UID
		}
	}
	if err := cluster.client.CoreV1().Pods(sampleNS).Delete(context.Background(), victim, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the killed instance started again", func() error {
		if id := containerID(t, url+"/container/one"); id != first {
			return fmt.Errorf("answered from %s", id)
		}
		for _, p := range instancePods(t, "containers-template-my-container") {
			if p.UID != victimUID && strings.HasSuffix(p.Annotations[podcontract.AnnotationContainerName], first) {
				return nil
			}
		}
		return fmt.Errorf("no new pod for object %s yet", first)
	})
	runTemplateSpec(t, name, url)
}

// containerID GETs url (retrying 5xx while the instance starts) and returns the object
// id the template's server reports.
func containerID(t *testing.T, url string) string {
	t.Helper()
	a := request(t, url, nil)
	m := containerAnswer.FindStringSubmatch(a.body)
	if a.status != 200 || m == nil {
		t.Fatalf("GET %s: %d %.300q, want the template's server's answer", url, a.status, a.body)
	}
	return m[1]
}

func instancePods(t *testing.T, dons string) []corev1.Pod {
	t.Helper()
	l, err := cluster.client.CoreV1().Pods(sampleNS).List(context.Background(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(specs.ContainerInstanceSelector(dons)).String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// checkInstancePod: the image asked for, Pod Security "restricted" (the namespace
// enforces it: the pod would not exist otherwise), owned by a shard pod, no token.
func checkInstancePod(t *testing.T, p corev1.Pod, image string) {
	t.Helper()
	c := p.Spec.Containers[0]
	if c.Image != image || p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
		t.Errorf("instance pod %s: image %s, automount %v", p.Name, c.Image, p.Spec.AutomountServiceAccountToken)
	}
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "Pod" || !strings.HasPrefix(p.OwnerReferences[0].Name, "containers-template-my-container-do-") {
		t.Errorf("instance pod %s owners %+v, want its shard pod", p.Name, p.OwnerReferences)
	}
}

func podOf(t *testing.T, pods []corev1.Pod, id string) string {
	t.Helper()
	for _, p := range pods {
		if strings.HasSuffix(p.Annotations[podcontract.AnnotationContainerName], id) {
			return p.Name
		}
	}
	t.Fatalf("no instance pod names object %s", id)
	return ""
}
