package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// TestValidate: each bad flag is refused before anything runs, naming the flag.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	ok := Options{Dir: dir, Image: "localhost:5001/hello", Rest: &rest.Config{}}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"valid", func(*Options) {}, ""},
		{"valid dry run without a cluster", func(o *Options) { o.Rest, o.DryRun = nil, true }, ""},
		{"no image", func(o *Options) { o.Image = "" }, "--image REPO: required"},
		{"image with tag", func(o *Options) { o.Image = "localhost:5001/hello:v1" }, "a repository without tag or digest"},
		{"image with digest", func(o *Options) { o.Image = "reg.example/hello@sha256:00" }, "a repository without tag or digest"},
		{"missing secrets file", func(o *Options) { o.SecretsFrom = filepath.Join(dir, ".dev.vars") }, "--secrets-from"},
		{"no cluster", func(o *Options) { o.Rest = nil }, "no cluster to deploy to"},
		{"no project", func(o *Options) { o.Dir = filepath.Join(dir, "nope") }, "not a project directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			err := o.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSecretFrom: --secrets-from reads a .dev.vars file (dotenv syntax,
// https://developers.cloudflare.com/workers/configuration/secrets/#local-development-with-secrets)
// into a Secret (never a ConfigMap) named as the Worker's secret bindings, with exactly
// the keys they bind; a bound key without a value is an error naming it.
func TestSecretFrom(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, ".dev.vars")
	if err := os.WriteFile(file, []byte("API_TOKEN=\"s3cr=t\"\n# a comment\nUNUSED=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := &wrangler.Result{Secret: "shop-secrets", SecretKeys: []string{"API_TOKEN"}}
	var log strings.Builder
	u, err := secretFrom(file, res, "team", &log)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Secret" || u.GetName() != "shop-secrets" || u.GetNamespace() != "team" {
		t.Errorf("got %s %s/%s, want Secret team/shop-secrets", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	data, _ := u.Object["stringData"].(map[string]any)
	if len(data) != 1 || data["API_TOKEN"] != "s3cr=t" {
		t.Errorf("stringData %v, want only API_TOKEN=s3cr=t", data)
	}
	if !strings.Contains(log.String(), "[UNUSED] are not secrets the Worker binds") {
		t.Errorf("no note on the unbound key: %q", log.String())
	}
	res.SecretKeys = append(res.SecretKeys, "DB_PASSWORD")
	if _, err := secretFrom(file, res, "", &log); err == nil || !strings.Contains(err.Error(), "no value for DB_PASSWORD") {
		t.Errorf("missing key: %v", err)
	}
	if _, err := secretFrom(file, &wrangler.Result{}, "", &log); err == nil || !strings.Contains(err.Error(), "binds no secret") {
		t.Errorf("no bindings: %v", err)
	}
}

// TestRepositoryName: the make dev repository is the directory's name as a DNS label.
func TestRepositoryName(t *testing.T) {
	for in, want := range map[string]string{"/x/My App": "my-app", "/x/hello-world-do-template": "hello-world-do-template", "/x/__": "worker"} {
		if got := RepositoryName(in); got != want {
			t.Errorf("RepositoryName(%q) = %q, want %q", in, got, want)
		}
	}
}
