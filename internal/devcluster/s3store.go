package devcluster

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// S3Store is config/dev/r2's S3-compatible store: its Secret, a copy of it named
// "<bucket>-s3" (the credentials Secret an R2Bucket made by import or deploy names),
// its Deployment and its Service.
type S3Store struct {
	Secret, Credentials, Deployment, Service *unstructured.Unstructured
}

// ReadS3Store reads config/dev/r2/r2.yaml under repoRoot for the bucket's Worker.
func ReadS3Store(repoRoot, bucket string) (S3Store, error) {
	path := filepath.Join(repoRoot, "config", "dev", "r2", "r2.yaml")
	all, err := ReadManifests(path)
	if err != nil {
		return S3Store{}, err
	}
	var s S3Store
	for _, o := range all {
		switch o.GetKind() {
		case "Secret":
			s.Secret = o
			s.Credentials = o.DeepCopy()
			s.Credentials.SetName(bucket + "-s3")
		case "Deployment":
			s.Deployment = o
		case "Service":
			s.Service = o
		}
	}
	if s.Secret == nil || s.Deployment == nil || s.Service == nil {
		return S3Store{}, fmt.Errorf("%s: want a Secret, a Deployment and a Service", path)
	}
	return s, nil
}

// Objects are the store's objects, in namespace ns.
func (s S3Store) Objects(ns string) []*unstructured.Unstructured {
	objs := []*unstructured.Unstructured{s.Secret, s.Credentials, s.Deployment, s.Service}
	for _, o := range objs {
		o.SetNamespace(ns)
	}
	return objs
}

// Keys are the store's access key id and secret access key.
func (s S3Store) Keys() (accessKeyID, secretAccessKey string) {
	accessKeyID, _, _ = unstructured.NestedString(s.Secret.Object, "stringData", "AWS_ACCESS_KEY_ID")
	secretAccessKey, _, _ = unstructured.NestedString(s.Secret.Object, "stringData", "AWS_SECRET_ACCESS_KEY")
	return accessKeyID, secretAccessKey
}
