package wrangler

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// containers[] entries become the spec.container of their class's
// DurableObjectNamespace (https://developers.cloudflare.com/containers/wrangler-configuration/).
func TestContainers(t *testing.T) {
	project := func(containers string, extra map[string]string) map[string]string {
		files := map[string]string{
			"wrangler.jsonc": `{"name": "app", "main": "index.js", "compatibility_date": "2025-10-08",
				"durable_objects": {"bindings": [{"name": "MY_CONTAINER", "class_name": "MyContainer"}]},
				"migrations": [{"tag": "v1", "new_sqlite_classes": ["MyContainer"]}],
				"containers": ` + containers + `}`,
			"index.js": "export default {}",
		}
		for k, v := range extra {
			files[k] = v
		}
		return files
	}
	dockerfile := map[string]string{"Dockerfile": "FROM scratch\n"}
	cases := []struct {
		name            string
		files           map[string]string
		images          map[string]string
		want            *v1alpha1.ContainerSpec
		wantErr         []string
		wantUnsupported []string
		wantIgnored     string
	}{
		{name: "registry image", files: project(`[{"class_name": "MyContainer", "image": "registry.example.com/app:1", "max_instances": 10, "instance_type": "basic"}]`, nil),
			want: &v1alpha1.ContainerSpec{Image: "registry.example.com/app:1", MaxInstances: ptr.To[int32](10), InstanceType: "basic"}},
		{name: "dev is lite", files: project(`[{"class_name": "MyContainer", "image": "r.example/a:1", "instance_type": "dev"}]`, nil),
			want: &v1alpha1.ContainerSpec{Image: "r.example/a:1", InstanceType: "lite"}},
		{name: "Dockerfile with --container-image", files: project(`[{"class_name": "MyContainer", "image": "./Dockerfile", "max_instances": 3}]`, dockerfile),
			images: map[string]string{"MyContainer": "localhost:5001/app-container:1"},
			want:   &v1alpha1.ContainerSpec{Image: "localhost:5001/app-container:1", MaxInstances: ptr.To[int32](3)}},
		{name: "Dockerfile without an image", files: project(`[{"class_name": "MyContainer", "image": "./Dockerfile"}]`, dockerfile),
			wantErr: []string{"containers[0].image: Dockerfile is a Dockerfile", "--container-image MyContainer=REF", "docs/containers.md"}},
		{name: "--container-image of no class", files: project(`[{"class_name": "MyContainer", "image": "r.example/a:1"}]`, nil),
			images:  map[string]string{"Other": "r.example/b:1"},
			wantErr: []string{"--container-image Other: no containers[] entry has class_name Other"}},
		{name: "class without a Durable Object binding", files: project(`[{"class_name": "Nobody", "image": "r.example/a:1"}]`, nil),
			wantUnsupported: []string{"containers[0].class_name"}},
		{name: "custom instance type", files: project(`[{"class_name": "MyContainer", "image": "r.example/a:1", "instance_type": {"vcpu": 1, "memory_mib": 4096}}]`, nil),
			wantUnsupported: []string{"containers[0].instance_type"}},
		{name: "max_instances out of range", files: project(`[{"class_name": "MyContainer", "image": "r.example/a:1", "max_instances": 0}]`, nil),
			wantUnsupported: []string{"containers[0].max_instances"}},
		{name: "rollout keys are Cloudflare's", files: project(`[{"class_name": "MyContainer", "image": "r.example/a:1", "rollout_step_percentage": 25}]`, nil),
			want: &v1alpha1.ContainerSpec{Image: "r.example/a:1"}, wantIgnored: "containers[0].rollout_step_percentage"},
		{name: "unknown key", files: project(`[{"class_name": "MyContainer", "image": "r.example/a:1", "gpu": true}]`, nil),
			wantUnsupported: []string{"containers[0].gpu"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Import(Options{Path: writeProject(t, tc.files), ContainerImages: tc.images})
			var ue *UnsupportedError
			if errors.As(err, &ue) {
				var paths []string
				for _, i := range ue.Issues {
					paths = append(paths, i.Path)
				}
				if !reflect.DeepEqual(paths, tc.wantUnsupported) {
					t.Errorf("unsupported %v, want %v", paths, tc.wantUnsupported)
				}
				return
			}
			if tc.wantUnsupported != nil {
				t.Fatalf("err %v, want unsupported %v", err, tc.wantUnsupported)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err %v, want one with %q", err, w)
				}
			}
			if tc.wantErr != nil {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.DurableObjectNamespaces) != 1 {
				t.Fatalf("%d DurableObjectNamespaces, want 1", len(res.DurableObjectNamespaces))
			}
			if got := res.DurableObjectNamespaces[0].Spec.Container; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("spec.container %+v, want %+v", got, tc.want)
			}
			if tc.wantIgnored != "" && !strings.Contains(joinIssues(res.Ignored), tc.wantIgnored) {
				t.Errorf("ignored %v lack %s", res.Ignored, tc.wantIgnored)
			}
		})
	}
}

// deploy passes --containers-rollout=none to wrangler only for a project with
// containers: wrangler 3 and early wrangler 4 refuse the flag.
func TestDeclaresContainers(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   bool
	}{
		{`{"name": "a", "containers": [{"class_name": "C", "image": "./Dockerfile"}]}`, true},
		{`{"name": "a", "env": {"staging": {"containers": [{"class_name": "C", "image": "r/x:1"}]}}}`, true},
		{`{"name": "a", "containers": []}`, false},
		{`{"name": "a"}`, false},
	} {
		dir := writeProject(t, map[string]string{"wrangler.jsonc": tc.config})
		if got := DeclaresContainers(dir); got != tc.want {
			t.Errorf("DeclaresContainers(%s) = %v, want %v", tc.config, got, tc.want)
		}
	}
	if DeclaresContainers(t.TempDir()) {
		t.Error("a directory without a configuration declares containers")
	}
}
