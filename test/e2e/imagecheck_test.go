package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/hack/ociimage"
	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/failure"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// linksImage is an asset image another tool built, with symbolic links to the
// namespace's internal TLS key: absolute and relative (import --image never packs a
// link).
const linksImage = "localhost/workerd-operator/e2e-links:1"

func linksImageVolume(dir string) (devcluster.ImageDirectory, error) {
	img := &ociimage.Image{Ref: linksImage, Layers: [][]ociimage.File{{
		{Path: "/site", Dir: true, Mode: 0o755},
		{Path: "/site/index.html", Mode: 0o644, Data: []byte("<h1>hi</h1>")},
		{Path: "/site/key.txt", Mode: 0o777, Link: podcontract.InternalTLSDir + "/" + podcontract.InternalTLSKey},
		{Path: "/site/key2.txt", Mode: 0o777, Link: "../" + podcontract.InternalTLSSubdir + "/" + podcontract.InternalTLSKey},
	}}}
	archive := filepath.Join(dir, "links.tar")
	if err := img.WriteArchive(archive); err != nil {
		return devcluster.ImageDirectory{}, err
	}
	return devcluster.ImageDirectory{Image: strings.TrimSuffix(linksImage, ":1"), Archive: archive}, nil
}

// TestImageCheckRefusesPod: a Worker whose asset image holds links out of it never runs
// workerd on the local cluster: the pod's image-check init container refuses it, and
// status.lastFailure says image_link_outside, naming the container and the file.
// (TestAssetsOnlyServes shows an image without such links passing the same check.)
func TestImageCheckRefusesPod(t *testing.T) {
	ctx := context.Background()
	w := &fleetv1alpha1.Worker{}
	w.Namespace, w.Name = sampleNS, "links-site"
	w.Spec.CompatibilityDate = "2025-10-08"
	w.Spec.Assets = &fleetv1alpha1.WorkerAssets{Image: linksImage, Path: "/site", PullPolicy: "IfNotPresent"}
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), w) })
	eventually(t, 3*time.Minute, "Worker links-site lastFailure", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		f := w.Status.LastFailure
		if f == nil || f.Cause != string(failure.CauseImageLinkOutside) {
			return fmt.Errorf("lastFailure %+v, want cause %s", f, failure.CauseImageLinkOutside)
		}
		return nil
	})
	f := w.Status.LastFailure
	t.Logf("status.lastFailure: %+v", *f)
	if f.Container != podcontract.ImageCheckContainer || !strings.Contains(f.Message, `"key.txt"`) || !strings.Contains(f.Message, "spec.assets") {
		t.Errorf("lastFailure %+v: want container %s and a message naming spec.assets and key.txt", f, podcontract.ImageCheckContainer)
	}
	for _, p := range workerPods(t, w.Name) {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if cs.Name != podcontract.ImageCheckContainer && (cs.State.Running != nil || cs.LastTerminationState.Terminated != nil) {
				t.Errorf("pod %s: container %s ran (%+v) behind a refused image check", p.Name, cs.Name, cs.State)
			}
		}
	}
}
