package deploy

import (
	"fmt"
	"io"
	"sort"

	"github.com/joho/godotenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// secretFrom reads the dotenv file (wrangler's .dev.vars / .env syntax,
// https://developers.cloudflare.com/workers/configuration/secrets/#local-development-with-secrets)
// into the Secret the Worker's secret bindings name. Every key the Worker binds must
// have a value; keys it does not bind are left out, with a note.
func secretFrom(file string, res *wrangler.Result, ns string, log io.Writer) (*unstructured.Unstructured, error) {
	vals, err := godotenv.Read(file)
	if err != nil {
		return nil, fmt.Errorf("--secrets-from %s: %w", file, err)
	}
	if res.Secret == "" {
		return nil, fmt.Errorf("--secrets-from %s: the Worker binds no secret (none in .dev.vars or secrets.required; "+
			"https://developers.cloudflare.com/workers/configuration/secrets/)", file)
	}
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: res.Secret, Namespace: ns},
		StringData: map[string]string{},
	}
	for _, k := range res.SecretKeys {
		v, ok := vals[k]
		if !ok {
			return nil, fmt.Errorf("--secrets-from %s: no value for %s, which the Worker binds as a secret", file, k)
		}
		s.StringData[k] = v
		delete(vals, k)
	}
	var extra []string
	for k := range vals {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		fmt.Fprintf(log, "deploy: note: %s: %v are not secrets the Worker binds: left out of Secret %s\n", file, extra, res.Secret)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
