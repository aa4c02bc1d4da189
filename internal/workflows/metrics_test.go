package workflows

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// TestEngineGauges: runs_in_flight and runs_ready read the engine's state per workflow
// when scraped (two runs in flight and three ready in one workflow, none in another).
func TestEngineGauges(t *testing.T) {
	e, err := New(Options{DataDir: t.TempDir(), RunnerURL: "http://127.0.0.1:9",
		Workflows: []api.WorkflowConfig{{Name: "busy"}, {Name: "idle"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.mu.Lock()
	w := e.wfs["busy"]
	w.inflight["a"], w.inflight["b"] = true, true
	for i, id := range []string{"c", "d", "e"} {
		w.ready = append(w.ready, readyItem{prio: 1, seq: uint64(i), id: id})
	}
	e.mu.Unlock()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(engineGauges{e})
	want := `
# HELP workerd_operator_workflow_runs_in_flight Instances whose code is running now (each holds one of the workflow's concurrency slots).
# TYPE workerd_operator_workflow_runs_in_flight gauge
workerd_operator_workflow_runs_in_flight{workflow="busy"} 2
workerd_operator_workflow_runs_in_flight{workflow="idle"} 0
# HELP workerd_operator_workflow_runs_ready Instances ready to run and waiting for a concurrency slot (queued, woken or resumed).
# TYPE workerd_operator_workflow_runs_ready gauge
workerd_operator_workflow_runs_ready{workflow="busy"} 3
workerd_operator_workflow_runs_ready{workflow="idle"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
