package realnode

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/hack/ociimage"
	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// s3Image is config/dev/r2's S3-compatible store on the node: the versitygw binary
// hack/install-s3.sh builds (it links glibc) on the distroless cc base.
const s3Image = "localhost/workerd-operator/realnode-s3:1"

// writeS3Image writes s3Image's archive as <dir>/images/s3.tar.
func writeS3Image(dir string) error {
	bin, err := toolchain.S3Server()
	if err != nil {
		return err
	}
	base, env, err := ociimage.BaseFiles("gcr.io/distroless/cc-debian12")
	if err != nil {
		return err
	}
	img := &ociimage.Image{Ref: s3Image, Env: env, User: "65532:65532", Entrypoint: []string{"/versitygw"},
		Layers: [][]ociimage.File{base, {{Path: "/versitygw", Mode: 0o755, HostPath: bin}}}}
	return img.WriteArchive(filepath.Join(dir, "images", "s3.tar"))
}

// startS3 runs config/dev/r2's store (its Secret, Deployment and Service) on the node,
// with the credentials Secret "<bucket>-s3" that deploy's R2Bucket names, and creates
// bucket through the S3 API. The image is s3Image; instead of busybox making the
// directories, each is a volume of its own and versitygw creates the bucket.
func startS3(t *testing.T, bucket string) {
	t.Helper()
	ctx := context.Background()
	store, err := devcluster.ReadS3Store(repoRoot, bucket)
	if err != nil {
		t.Fatal(err)
	}
	s3OnNode(t, store.Deployment)
	objs := store.Objects(sampleNS)
	removeAtEnd(t, objs)
	if err := cluster.apply(ctx, objs, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.waitReady(ctx, objs, 3*time.Minute); err != nil {
		logPods(t, sampleNS, "s3-")
		t.Fatal(err)
	}
	u, err := url.Parse(siteURL(t, "s3"))
	if err != nil {
		t.Fatal(err)
	}
	access, secret := store.Keys()
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "create bucket "+bucket, func() error {
		return c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
	})
}

// s3OnNode is r2.yaml's Deployment with s3Image, no init container and the posix
// backend's two directories as emptyDirs.
func s3OnNode(t *testing.T, d *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	spec := []string{"spec", "template", "spec"}
	containers, _, _ := unstructured.NestedSlice(d.Object, append(spec, "containers")...)
	c := containers[0].(map[string]any)
	c["image"] = s3Image
	c["volumeMounts"] = []any{
		map[string]any{"name": "meta", "mountPath": "/data/meta"},
		map[string]any{"name": "objects", "mountPath": "/data/objects"},
	}
	set := func(v any, field string) {
		if err := unstructured.SetNestedField(d.Object, v, append(spec, field)...); err != nil {
			t.Fatal(err)
		}
	}
	set(containers, "containers")
	set([]any{
		map[string]any{"name": "meta", "emptyDir": map[string]any{}},
		map[string]any{"name": "objects", "emptyDir": map[string]any{}},
	}, "volumes")
	unstructured.RemoveNestedField(d.Object, append(spec, "initContainers")...)
	return d
}
