package specs

import (
	"reflect"
	"strings"
	"testing"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// The sidecar learns its container's memory limit (downward API) and sets its Go
// memory limit from it, so the collector works harder before the kernel kills it.
func TestSidecarMemoryLimitEnv(t *testing.T) {
	c := sidecarContainerSpec(DefaultOptions())
	for _, e := range c.Env {
		if e.Name != podcontract.MemoryLimitEnv {
			continue
		}
		ref := e.ValueFrom
		if ref == nil || ref.ResourceFieldRef == nil || ref.ResourceFieldRef.Resource != "limits.memory" ||
			ref.ResourceFieldRef.ContainerName != podcontract.SidecarContainer {
			t.Fatalf("%s: %+v, want resourceFieldRef limits.memory of the sidecar container", e.Name, e.ValueFrom)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Fatal("the sidecar container has no memory limit")
		}
		return
	}
	t.Fatalf("sidecar env %+v has no %s", c.Env, podcontract.MemoryLimitEnv)
}

// The sidecar of a Worker with R2 bindings gets the Worker's outbound rules (the rules
// of its network service and NetworkPolicy egress: spec.outbound over the operator's
// default, the admin's deny list added), which its R2 gateway dials under; a Worker
// without R2 bindings gets none.
func TestSidecarOutboundEnv(t *testing.T) {
	opts := DefaultOptions()
	opts.Outbound.Deny = []string{"169.254.169.254/32"}
	w := fixtureWorker(func(w *fleetv1alpha1.Worker) {
		w.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "B", R2Bucket: &fleetv1alpha1.LocalObjectReference{Name: "photos"}}}
		w.Spec.Outbound = &fleetv1alpha1.OutboundSpec{Deny: []string{"10.96.0.10"}}
	})
	out, err := render.Render(render.Input{Worker: w, Options: render.Options{Outbound: opts.Outbound},
		R2Buckets: map[string]render.R2BucketTarget{"photos": {Endpoint: "http://s3.storage:7070", Bucket: "photos", SecretName: "s3"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"allow":["public","10.96.0.0/12","10.244.0.0/16"],"deny":["10.96.0.10/32","169.254.169.254/32"]}`
	if got := sidecarEnv(BuildWorkerChildren(w, out, "i", opts), podcontract.SidecarOutboundEnv); got != want {
		t.Errorf("$%s = %q, want %q", podcontract.SidecarOutboundEnv, got, want)
	}
	if got := sidecarEnv(build(t, fixtureWorker()), podcontract.SidecarOutboundEnv); got != "" {
		t.Errorf("Worker without R2: $%s = %q, want unset", podcontract.SidecarOutboundEnv, got)
	}
}

func sidecarEnv(c WorkerChildren, name string) string {
	for _, ic := range c.Deployment.Spec.Template.Spec.InitContainers {
		for _, e := range ic.Env {
			if ic.Name == podcontract.SidecarContainer && e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// The manager's --request-cf-* settings reach every Worker pod's sidecar as its flags;
// a GeoIP image is an image volume mounted read-only at podcontract.GeoIPDir in the
// sidecar only. Unset, the sidecar gets none of them and the pod no volume.
func TestSidecarRequestCF(t *testing.T) {
	cases := []struct {
		name  string
		rcf   RequestCF
		flags []string
		image string
	}{
		{"unset", RequestCF{}, nil, ""},
		{"all", RequestCF{Colo: "fra1", TrustedProxies: []string{"10.0.0.0/8", "192.0.2.1"}, GeoIPImage: "registry.example/geoip:2026-12"},
			[]string{"--request-cf-colo=fra1", "--request-cf-trusted-proxies=10.0.0.0/8,192.0.2.1", "--request-cf-geoip-dir=" + podcontract.GeoIPDir},
			"registry.example/geoip:2026-12"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.RequestCF = tc.rcf
			w := fixtureWorker()
			out, err := render.Render(render.Input{Worker: w})
			if err != nil {
				t.Fatal(err)
			}
			pod := BuildWorkerChildren(w, out, "i", opts).Deployment.Spec.Template.Spec
			var flags []string
			var mounted bool
			for _, c := range pod.InitContainers {
				if c.Name != podcontract.SidecarContainer {
					continue
				}
				for _, a := range c.Args {
					if strings.HasPrefix(a, "--request-cf-") {
						flags = append(flags, a)
					}
				}
				for _, m := range c.VolumeMounts {
					mounted = mounted || (m.MountPath == podcontract.GeoIPDir && m.ReadOnly)
				}
			}
			var image string
			for _, v := range pod.Volumes {
				if v.Image != nil && v.Image.Reference == tc.image {
					image = v.Image.Reference
				}
			}
			if !reflect.DeepEqual(flags, tc.flags) || image != tc.image || mounted != (tc.image != "") {
				t.Errorf("sidecar flags %q, image volume %q, mounted %v; want %q, %q, %v", flags, image, mounted, tc.flags, tc.image, tc.image != "")
			}
		})
	}
}
