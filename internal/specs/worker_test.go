package specs

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Builders are pure: these tests need no API server.

func fixtureWorker(opts ...func(*fleetv1alpha1.Worker)) *fleetv1alpha1.Worker {
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "uid-1"},
		Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01",
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "lib/worker.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To("export default {}"),
			}}}},
		},
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

func build(t *testing.T, w *fleetv1alpha1.Worker) WorkerChildren {
	t.Helper()
	in := render.Input{Worker: w}
	if src := w.Spec.Source.ConfigMap; src != nil {
		in.ConfigMap = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: src.Name},
			Data: map[string]string{src.Main: "export default {}"}}
	}
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return BuildWorkerChildren(w, out, "inputs", DefaultOptions())
}

func TestBuildWorkerChildren(t *testing.T) {
	cases := []struct {
		name  string
		opts  []func(*fleetv1alpha1.Worker)
		check func(t *testing.T, c WorkerChildren)
	}{
		{
			name: "defaults: 1 replica, 128 MiB heap + 64 MiB headroom, port 8080",
			check: func(t *testing.T, c WorkerChildren) {
				if *c.Deployment.Spec.Replicas != 1 {
					t.Errorf("replicas %d", *c.Deployment.Spec.Replicas)
				}
				if got := c.Deployment.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String(); got != "384Mi" {
					t.Errorf("memory limit %s, want 384Mi", got)
				}
				if c.Service.Spec.Ports[0].Port != 8080 {
					t.Errorf("port %d", c.Service.Spec.Ports[0].Port)
				}
			},
		},
		{
			name: "module paths with / map to ConfigMap keys and mount items",
			check: func(t *testing.T, c WorkerChildren) {
				items := c.Deployment.Spec.Template.Spec.Volumes[0].ConfigMap.Items
				var found bool
				for _, it := range items {
					if it.Path == "modules/lib/worker.js" {
						found = true
						if strings.Contains(it.Key, "/") {
							t.Errorf("ConfigMap key %q holds a /", it.Key)
						}
						if _, ok := c.ConfigMap.Data[it.Key]; !ok {
							t.Errorf("item key %q not in the ConfigMap", it.Key)
						}
					}
				}
				if !found {
					t.Errorf("items %+v lack modules/lib/worker.js", items)
				}
			},
		},
		{
			name: "configMap source is mounted as is under modules",
			opts: []func(*fleetv1alpha1.Worker){func(w *fleetv1alpha1.Worker) {
				w.Spec.Source = fleetv1alpha1.WorkerSource{ConfigMap: &fleetv1alpha1.ConfigMapSource{Name: "code", Main: "worker.js"}}
			}},
			check: func(t *testing.T, c WorkerChildren) {
				var vol *corev1.Volume
				for i, v := range c.Deployment.Spec.Template.Spec.Volumes {
					if v.Name == "modules" {
						vol = &c.Deployment.Spec.Template.Spec.Volumes[i]
					}
				}
				if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != "code" {
					t.Fatalf("modules volume %+v, want the user's ConfigMap code", vol)
				}
			},
		},
		{
			name: "spec.pod passthrough; operator labels win",
			opts: []func(*fleetv1alpha1.Worker){func(w *fleetv1alpha1.Worker) {
				w.Spec.Pod = &fleetv1alpha1.PodOverrides{
					Labels:            map[string]string{"team": "edge", podcontract.LabelWorker: "spoofed"},
					NodeSelector:      map[string]string{"pool": "workers"},
					PriorityClassName: "high",
					Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
				}
			}},
			check: func(t *testing.T, c WorkerChildren) {
				tpl := c.Deployment.Spec.Template
				if tpl.Labels["team"] != "edge" || tpl.Labels[podcontract.LabelWorker] != "w" {
					t.Errorf("labels %v", tpl.Labels)
				}
				if tpl.Spec.NodeSelector["pool"] != "workers" || tpl.Spec.PriorityClassName != "high" || len(tpl.Spec.Tolerations) != 1 {
					t.Errorf("pod spec passthrough lost: %+v", tpl.Spec)
				}
			},
		},
		{
			name: "runtime.version picks the workerd image of that version",
			opts: []func(*fleetv1alpha1.Worker){func(w *fleetv1alpha1.Worker) {
				w.Spec.Runtime = &fleetv1alpha1.RuntimeSpec{Version: "1.20261001.1"}
			}},
			check: func(t *testing.T, c WorkerChildren) {
				if got := c.Deployment.Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/workerd-operator/workerd:1.20261001.1" {
					t.Errorf("image %s", got)
				}
			},
		},
		{
			name: "service type and annotations",
			opts: []func(*fleetv1alpha1.Worker){func(w *fleetv1alpha1.Worker) {
				w.Spec.Service = &fleetv1alpha1.WorkerServiceSpec{Port: ptr.To[int32](80), Type: corev1.ServiceTypeLoadBalancer, Annotations: map[string]string{"a": "b"}}
			}},
			check: func(t *testing.T, c WorkerChildren) {
				if c.Service.Spec.Type != corev1.ServiceTypeLoadBalancer || c.Service.Annotations["a"] != "b" || c.Service.Spec.Ports[0].Port != 80 {
					t.Errorf("service %+v", c.Service.Spec)
				}
				if got := c.Deployment.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort; got != 80 {
					t.Errorf("container http port %d, want 80", got)
				}
			},
		},
		{
			name: "rolling update never drops below the desired count",
			check: func(t *testing.T, c WorkerChildren) {
				ru := c.Deployment.Spec.Strategy.RollingUpdate
				if ru == nil || ru.MaxUnavailable.IntValue() != 0 {
					t.Errorf("rolling update %+v, want maxUnavailable 0", ru)
				}
			},
		},
		{
			name: "the config ConfigMap name follows the version",
			check: func(t *testing.T, c WorkerChildren) {
				v := c.Deployment.Spec.Template.Annotations[podcontract.AnnotationVersion]
				if !strings.HasSuffix(c.ConfigMap.Name, v[:10]) {
					t.Errorf("ConfigMap %s does not carry version %s", c.ConfigMap.Name, v)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, build(t, fixtureWorker(tc.opts...)))
		})
	}
}

func TestBuildWorkerChildrenDeterministic(t *testing.T) {
	a, b := build(t, fixtureWorker()), build(t, fixtureWorker())
	if a.ConfigMap.Name != b.ConfigMap.Name || a.Deployment.Spec.Template.Annotations[podcontract.AnnotationVersion] != b.Deployment.Spec.Template.Annotations[podcontract.AnnotationVersion] {
		t.Error("the same Worker built twice differs")
	}
}

// The operator-wide OTLP endpoint reaches every pod's sidecar as --otlp-endpoint; unset,
// the sidecar gets no such flag.
func TestSidecarOTLPEndpoint(t *testing.T) {
	for _, endpoint := range []string{"", "http://otel.monitoring:4318/v1/traces"} {
		opts := DefaultOptions()
		opts.OTLPEndpoint = endpoint
		args := sidecarContainerSpec(opts).Args
		has := slices.Contains(args, "--otlp-endpoint="+endpoint)
		if has != (endpoint != "") || slices.ContainsFunc(args, func(a string) bool { return a == "--otlp-endpoint=" }) {
			t.Errorf("endpoint %q: sidecar args %v", endpoint, args)
		}
	}
}
