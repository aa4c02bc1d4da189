package render

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// R2BucketTarget is the S3-compatible bucket behind an R2Bucket (its spec.s3).
type R2BucketTarget struct {
	// Endpoint is the store's URL, e.g. "http://versitygw.storage:7070".
	Endpoint string
	// Bucket is the S3 bucket.
	Bucket string
	// Region signs the requests ("" is us-east-1).
	Region string
	// SecretName is the Secret with the keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	SecretName string
}

// R2Bucket is one bucket of the sidecar's R2 gateway as the sidecar env carries it
// (podcontract.R2ConfigEnv): internal/sidecar/r2.BucketConfig's JSON.
type R2Bucket struct {
	Name               string `json:"name"`
	Endpoint           string `json:"endpoint"`
	Bucket             string `json:"bucket"`
	Region             string `json:"region,omitempty"`
	AccessKeyIDEnv     string `json:"accessKeyIdEnv"`
	SecretAccessKeyEnv string `json:"secretAccessKeyEnv"`
}

// R2Service is the external service of R2Bucket name: an alias of the sidecar whose
// requests carry the bucket's name in podcontract.R2BucketHeader.
func R2Service(name string) string { return podcontract.R2ServicePrefix + name }

// r2Kind: an R2Bucket, through workerd's native r2Bucket binding to an alias of the
// sidecar, whose R2 gateway carries the calls out on the bucket's S3 store. The
// credentials reach only the sidecar, as env from the R2Bucket's Secret.
type r2Kind struct {
	in      Input
	targets map[string]R2BucketTarget
}

func newR2Kind(in Input) (bindingKind, error) {
	return &r2Kind{in: in, targets: map[string]R2BucketTarget{}}, nil
}

func (k *r2Kind) bind(field string, b v1alpha1.Binding) (string, error) {
	name := b.R2Bucket.Name
	if name == "" {
		return "", fmt.Errorf("%s.r2Bucket.name: required", field)
	}
	t, ok := k.in.R2Buckets[name]
	if !ok || t.Endpoint == "" || t.Bucket == "" {
		return "", fmt.Errorf("%s.r2Bucket.name: R2Bucket %q not found", field, name)
	}
	k.targets[name] = t
	return kv("r2Bucket", Quote(R2Service(name))), nil
}

// contribute adds one sidecar alias per R2Bucket and the sidecar's R2 env.
func (k *r2Kind) contribute(x *extras) error {
	if len(k.targets) == 0 {
		return nil
	}
	var cfg []R2Bucket
	for i, n := range sortedKeys(k.targets) {
		t := k.targets[n]
		header := tuple(named(podcontract.R2BucketHeader), kv("value", Quote(n)))
		x.services.item(named(R2Service(n)), kv("external", "(http = "+tuple(kv("injectRequestHeaders", list(header)))+")"))
		id, secret := r2CredentialEnv(i)
		cfg = append(cfg, R2Bucket{Name: n, Endpoint: t.Endpoint, Bucket: t.Bucket, Region: t.Region, AccessKeyIDEnv: id, SecretAccessKeyEnv: secret})
		for env, key := range map[string]string{id: v1alpha1.R2AccessKeyIDKey, secret: v1alpha1.R2SecretAccessKeyKey} {
			x.sidecarEnv = append(x.sidecarEnv, corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: t.SecretName}, Key: key,
			}}})
		}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	x.sidecarEnv = append(x.sidecarEnv, corev1.EnvVar{Name: podcontract.R2ConfigEnv, Value: string(b)})
	return nil
}

// r2CredentialEnv are the sidecar env vars of the i-th R2Bucket's credentials.
func r2CredentialEnv(i int) (accessKeyID, secretAccessKey string) {
	p := fmt.Sprintf("%s%d_", podcontract.R2CredentialsEnvPrefix, i)
	return p + "ACCESS_KEY_ID", p + "SECRET_ACCESS_KEY"
}

// R2Services are the external services of the R2Buckets w binds, which take the
// sidecar's address (Args, localrun).
func R2Services(w *v1alpha1.Worker) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range w.ReferencedNames(v1alpha1.ReferenceR2Bucket) {
		if !seen[n] {
			seen[n] = true
			out = append(out, R2Service(n))
		}
	}
	return out
}
