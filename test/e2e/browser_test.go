package e2e

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// specTemplates are the projects of the cloudflare/templates snapshot whose own
// Playwright specs (playwright-tests/<name>.spec.ts, unmodified) TestTemplateSpecs runs.
var specTemplates = []string{
	"hello-world-do-template",
	"vite-react-template",
	"astro-blog-starter-template",
	"d1-template",
	"to-do-list-kv-template",
	"r2-explorer-template",
}

// TestTemplateSpecs: each template, deployed on the cluster, passes the Playwright spec
// Cloudflare runs against it, in headless Chromium (testenv.RunSpec).
func TestTemplateSpecs(t *testing.T) {
	if err := testenv.BrowserReady(); errors.Is(err, testenv.ErrNoChromium) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	for _, name := range specTemplates {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			url := templateURL(t, name)
			deployed := time.Now()
			spec := testenv.SharedFile(t, "testdata", "cloudflare-templates", "playwright-tests", name+".spec.ts")
			if err := testenv.RunSpec(spec, url); err != nil {
				podLogs(t, name) // the Worker is named after the project (wrangler's name)
				t.Fatal(err)
			}
			t.Logf("deployed in %s, spec passed in %s", deployed.Sub(start).Round(time.Second), time.Since(deployed).Round(time.Second))
		})
	}
}

// templateURL builds and deploys the template name and returns its Service's URL.
func templateURL(t *testing.T, name string) string {
	t.Helper()
	if name != "r2-explorer-template" {
		project, bundle := buildTemplate(t, name)
		return serviceURL(t, importAndApply(t, project, bundle).Worker.Name)
	}
	project, bundle := buildTemplate(t, name, testenv.R2ExplorerBuild)
	return serviceURL(t, importAndApply(t, project, bundle, r2Store(t, "r2-explorer-bucket")).Worker.Name)
}

// r2Store runs the S3-compatible store of `make dev` (config/dev/r2: versitygw, its
// Service and credentials), creates bucket in it and the credentials Secret import's
// R2Bucket names (<bucket>-s3), and returns the option pointing the import at it.
func r2Store(t *testing.T, bucket string) func(*wrangler.Options) {
	t.Helper()
	ctx := context.Background()
	objs, err := devcluster.ReadManifests(filepath.Join(repoRoot, "config", "dev", "r2"))
	if err != nil {
		t.Fatal(err)
	}
	var store []*unstructured.Unstructured
	var creds map[string]string
	for _, o := range objs {
		switch o.GetName() {
		case "s3", "s3-credentials":
			o.SetNamespace(sampleNS)
			store = append(store, o)
		}
		if o.GetKind() == "Secret" {
			creds, _, _ = unstructured.NestedStringMap(o.Object, "stringData")
		}
	}
	if err := cluster.Apply(ctx, store, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitReady(ctx, store, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	id, secret := creds[v1alpha1.R2AccessKeyIDKey], creds[v1alpha1.R2SecretAccessKeyKey]
	u, err := url.Parse(serviceURL(t, "s3"))
	if err != nil {
		t.Fatal(err)
	}
	s3, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(id, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "create bucket "+bucket, func() error {
		ok, err := s3.BucketExists(ctx, bucket)
		if err != nil || ok {
			return err
		}
		return s3.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
	})
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bucket + "-s3", Namespace: sampleNS},
		StringData: map[string]string{v1alpha1.R2AccessKeyIDKey: id, v1alpha1.R2SecretAccessKeyKey: secret}}
	if err := k8sClient.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), sec) })
	return func(o *wrangler.Options) { o.R2Endpoint = "http://s3." + sampleNS + ".svc.cluster.local:7070" }
}
