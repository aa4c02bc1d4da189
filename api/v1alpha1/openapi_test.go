package v1alpha1_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
)

var restCfg *rest.Config

func createNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "v-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// TestOpenAPIDescribesCPUMs reads the OpenAPI v3 document the API server publishes for
// the group (what `kubectl explain` shows) and checks that spec.limits.cpuMs of Worker
// states its unit and its range.
func TestOpenAPIDescribesCPUMs(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	// The API server publishes a CRD group's OpenAPI shortly after the CRD is
	// established: wait for it.
	var gv openapi.GroupVersion
	deadline := time.Now().Add(60 * time.Second)
	for {
		paths, err := dc.OpenAPIV3().Paths()
		if err != nil {
			t.Fatal(err)
		}
		var ok bool
		if gv, ok = paths["apis/fleet.workerd-operator.io/v1alpha1"]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no OpenAPI v3 path for the group; have %d paths", len(paths))
		}
		time.Sleep(500 * time.Millisecond)
	}
	raw, err := gv.Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var worker json.RawMessage
	for name, s := range doc.Components.Schemas {
		if strings.HasSuffix(name, ".v1alpha1.Worker") {
			worker = s
		}
	}
	if worker == nil {
		t.Fatal("no Worker schema in the published OpenAPI document")
	}
	type schema struct {
		Description string            `json:"description"`
		Properties  map[string]schema `json:"properties"`
		Minimum     *float64          `json:"minimum"`
		Maximum     *float64          `json:"maximum"`
	}
	var w schema
	if err := json.Unmarshal(worker, &w); err != nil {
		t.Fatal(err)
	}
	cpu := w.Properties["spec"].Properties["limits"].Properties["cpuMs"]
	for _, want := range []string{"milliseconds", "1 to 300000"} {
		if !strings.Contains(cpu.Description, want) {
			t.Errorf("spec.limits.cpuMs description %q lacks %q", cpu.Description, want)
		}
	}
	if cpu.Minimum == nil || *cpu.Minimum != 1 || cpu.Maximum == nil || *cpu.Maximum != 300000 {
		t.Errorf("spec.limits.cpuMs range: minimum %v maximum %v, want 1 and 300000", cpu.Minimum, cpu.Maximum)
	}
}
